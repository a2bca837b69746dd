"""What a package touches of the private names (a leading underscore) of transformers, Accelerate, torch and datasets
(argparse's through transformers' HfArgumentParser), found by parsing its code with ``ast``:

- a private name imported from one of their modules, or a private module (``torch._inductor.cpp_builder``:
  ``_inductor``);
- ``x._name`` where ``x`` is one of their objects, or ``getattr(x, "_name")``: a Trainer, its accelerator, arguments,
  a parser; ``self`` and ``super()`` in a class derived from one of theirs, when the name is the library class's (a
  private method overridden or called, such as ``_save_checkpoint``), not the subclass's own.

Their objects are told apart by what the code says: a name annotated with, or assigned from, one of their classes
(or a subclass of the package's), the parameters of a method overriding one of theirs (a callback's ``args``,
``state``, ``control``), a variable named ``trainer``, and whatever is reached from one of these. Public names are
not listed, even those a library's top level does not export (``transformers.modeling_outputs.BaseModelOutput``) or
that Trainer sets itself (``trainer.state``): a release that drops one fails the import or the tests that use it."""

import ast
import importlib
import inspect
import textwrap
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from transformers import Trainer

LIBRARIES = ("transformers", "accelerate", "torch", "datasets")
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make"})  # public, by Python's naming


@dataclass(frozen=True)
class Use:
    name: str
    path: Path
    line: int
    on_trainer: bool = False  # an attribute of a Trainer object, not the subclass's own ``self``

    def __str__(self) -> str:
        return f"{self.name} ({self.path.name}:{self.line})"


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in NAMEDTUPLE_API


@cache
def assigned_attributes(cls: type) -> frozenset[str]:
    """The attributes ``cls``'s own code (its source, and its library bases') assigns as ``self.NAME = ...``."""
    names = set()
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] not in LIBRARIES:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):  # a class of compiled code (torch's C extension) has no source
            continue
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets:
                for leaf in ast.walk(target) if target is not None else ():
                    if isinstance(leaf, ast.Attribute) and isinstance(leaf.value, ast.Name) and leaf.value.id == "self":
                        names.add(leaf.attr)
    return frozenset(names)


def library_object(module: str, name: str) -> object:
    """``name`` of the library's ``module``, None where the name is not there (a release without it)."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


class Scope:
    """The names of one function (or module) that hold objects of the libraries (``library``) and Trainers."""

    def __init__(self, library: set[str] | None = None, trainers: set[str] | None = None):
        self.library = set(library or ()) | {"trainer"}
        self.trainers = set(trainers or ()) | {"trainer"}


class Finder(ast.NodeVisitor):
    """The private uses of one file (``uses``); ``classes``: the library-derived classes known so far, by name, with
    their library bases, shared between the files of the package."""

    def __init__(self, path: Path, classes: dict[str, tuple[type, ...]]):
        self.path, self.classes, self.uses = path, classes, []
        self.imported: dict[str, object] = {}  # local name -> the library's class, module or constant
        self.scope, self.owner = Scope(), None  # owner: the library-derived class being read, by name

    def use(self, name: str, node: ast.AST, on_trainer: bool = False) -> None:
        self.uses.append(Use(name, self.path, node.lineno, on_trainer))

    # what a name or annotation refers to
    def library_bases(self, node: ast.AST | None) -> tuple[type, ...]:
        """The library classes ``node`` (a name, an annotation such as ``X | None``, a string) is or derives from."""
        if node is None:
            return ()
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return self.library_bases(ast.parse(node.value, mode="eval").body)
        if isinstance(node, ast.BinOp):
            return self.library_bases(node.left) + self.library_bases(node.right)
        if isinstance(node, ast.Subscript):  # tuple[X, ...], list[X]
            return self.library_bases(node.slice)
        if isinstance(node, ast.Tuple):
            return tuple(base for element in node.elts for base in self.library_bases(element))
        if isinstance(node, ast.Attribute):  # datasets.Dataset
            owner = self.imported.get(node.value.id) if isinstance(node.value, ast.Name) else None
            found = getattr(owner, node.attr, None)
            return (found,) if isinstance(found, type) else ()
        name = node.id if isinstance(node, ast.Name) else None
        if name in self.classes:
            return self.classes[name]
        found = self.imported.get(name)
        return (found,) if isinstance(found, type) else ()

    def is_trainer_type(self, node: ast.AST | None) -> bool:
        return any(issubclass(base, Trainer) for base in self.library_bases(node))

    def is_library(self, node: ast.AST) -> bool:
        """Whether ``node`` evaluates to an object of the libraries (or reaches one)."""
        if isinstance(node, ast.Name):
            if node.id == "self":
                return self.owner is not None
            return node.id in self.scope.library or node.id in self.imported or node.id in self.classes
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "super":
                return self.owner is not None
            return bool(self.library_bases(node.func)) or self.is_library(node.func)
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            return self.is_library(node.value)
        if isinstance(node, ast.IfExp):
            return self.is_library(node.body) or self.is_library(node.orelse)
        return False

    def is_trainer(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id in self.scope.trainers

    def is_self(self, node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == "self") or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
        )

    # the check
    def attribute(self, value: ast.AST, name: str, node: ast.AST) -> None:
        if not private(name):
            return
        if self.owner is not None and self.is_self(value):
            bases = self.classes[self.owner]
            if not any(hasattr(base, name) or name in assigned_attributes(base) for base in bases):
                return  # the subclass's own
            self.use(name, node)
        elif self.is_library(value):
            self.use(name, node, on_trainer=self.is_trainer(value))

    # the walk
    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        root = (node.module or "").split(".")[0]
        if node.level or root not in LIBRARIES:
            return
        for part in node.module.split("."):
            if private(part):
                self.use(part, node)
        for alias in node.names:
            self.imported[alias.asname or alias.name] = library_object(node.module, alias.name)
            if private(alias.name):
                self.use(alias.name, node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            root = alias.name.split(".")[0]
            if root in LIBRARIES:  # ``import transformers.trainer`` binds ``transformers``
                self.imported[alias.asname or root] = importlib.import_module(alias.name if alias.asname else root)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases = tuple(base for expression in node.bases for base in self.library_bases(expression))
        if not bases:
            return self.generic_visit(node)
        self.classes[node.name] = bases
        owner, self.owner = self.owner, node.name
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and private(item.name):
                if any(hasattr(base, item.name) for base in bases):  # an override of a private method
                    self.use(item.name, item)
        self.generic_visit(node)
        self.owner = owner

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs, node.args.vararg, node.args.kwarg]
        arguments = [argument for argument in arguments if argument is not None and argument.arg != "self"]
        overrides = self.owner is not None and any(hasattr(base, node.name) for base in self.classes[self.owner])
        library = {a.arg for a in arguments if overrides or self.library_bases(a.annotation)}
        trainers = {a.arg for a in arguments if self.is_trainer_type(a.annotation)}
        outer, self.scope = self.scope, Scope(self.scope.library | library, self.scope.trainers | trainers)
        self.generic_visit(node)
        self.scope = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for target in node.targets:
            if isinstance(target, ast.Name) and self.is_library(node.value):  # parser = HfArgumentParser(...)
                self.scope.library.add(target.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.attribute(node.value, node.attr, node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        if isinstance(function, ast.Name) and function.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                self.attribute(node.args[0], name.value, node)
        self.generic_visit(node)


def private_uses(package: Path) -> list[Use]:
    """Every use of the libraries' internals in the ``.py`` files of ``package`` (a folder), in file order. Files are
    read until no new library-derived class is found, so a subclass of another file's subclass counts too."""
    files = sorted(package.rglob("*.py"))
    classes: dict[str, tuple[type, ...]] = {}
    while True:
        known, uses = dict(classes), []
        for path in files:
            finder = Finder(path, classes)
            finder.visit(ast.parse(path.read_text(), str(path)))
            uses += finder.uses
        if classes == known:
            return uses
