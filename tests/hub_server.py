"""A small Hugging Face Hub-compatible server for tests: the real huggingface_hub and transformers clients talk to it
over HTTP on 127.0.0.1 (``HF_ENDPOINT`` pointed at it), with no network.

It implements what the clients call, following the documented Hub API: whoami, create repo, create branch,
README metadata validation, preupload (every file "regular", so it travels inline in the commit), commit (NDJSON),
model info and revision info, tree listing, and file resolve (HEAD and GET) with the headers huggingface_hub checks
(X-Repo-Commit, ETag, Content-Length, X-Error-Code). Every commit is kept on disk as a full snapshot, so revisions
are real. Writes need a valid token (401 otherwise); a private repository is invisible without its owner's token.
"""

import base64
import hashlib
import json
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a file, which the Hub uses as the ETag of regular files."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


class HubStorage:
    """Repositories on disk: ``<root>/<repo_id>/{meta.json, refs.json, commits/<sha>/{files..., .commit.json}}``."""

    def __init__(self, root: Path, tokens: dict[str, str]):
        self.root, self.tokens, self.lock = root, tokens, threading.Lock()

    def user(self, token: str | None) -> str | None:
        return self.tokens.get(token) if token else None

    def repo_dir(self, repo_id: str) -> Path:
        return self.root / repo_id

    def meta(self, repo_id: str, user: str | None) -> dict:
        path = self.repo_dir(repo_id) / "meta.json"
        if not path.is_file():
            raise HubError(404, f"Repository {repo_id} not found", "RepoNotFound")
        meta = json.loads(path.read_text())
        if meta["private"] and user != meta["owner"]:
            # as the Hub: a private repo looks absent to others, and asks for credentials
            raise HubError(401 if user is None else 404, f"Repository {repo_id} not found", "RepoNotFound")
        return meta

    def create_repo(self, repo_id: str, owner: str, private: bool) -> None:
        with self.lock:
            folder = self.repo_dir(repo_id)
            if (folder / "meta.json").is_file():
                raise HubError(409, "You already created this model repo")
            initial = hashlib.sha1(f"{repo_id}{time.time_ns()}".encode()).hexdigest()
            (folder / "commits" / initial).mkdir(parents=True)
            self._write_commit_meta(folder, initial, None, "initial commit")
            (folder / "meta.json").write_text(json.dumps({"owner": owner, "private": private}))
            (folder / "refs.json").write_text(json.dumps({"main": initial}))

    def resolve(self, repo_id: str, revision: str) -> str:
        refs = json.loads((self.repo_dir(repo_id) / "refs.json").read_text())
        if revision in refs:
            return refs[revision]
        if len(revision) == 40 and (self.repo_dir(repo_id) / "commits" / revision).is_dir():
            return revision
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")

    def snapshot(self, repo_id: str, sha: str) -> Path:
        return self.repo_dir(repo_id) / "commits" / sha

    def files(self, repo_id: str, sha: str) -> list[Path]:
        root = self.snapshot(repo_id, sha)
        return sorted(p for p in root.rglob("*") if p.is_file() and p.name != ".commit.json")

    def create_branch(self, repo_id: str, branch: str, starting_point: str) -> None:
        with self.lock:
            refs_path = self.repo_dir(repo_id) / "refs.json"
            refs = json.loads(refs_path.read_text())
            if branch in refs:
                raise HubError(409, f"Reference already exists: refs/heads/{branch}")
            refs[branch] = self.resolve(repo_id, starting_point)
            refs_path.write_text(json.dumps(refs))

    def commit(self, repo_id: str, branch: str, lines: list[dict]) -> str:
        with self.lock:
            folder = self.repo_dir(repo_id)
            refs = json.loads((folder / "refs.json").read_text())
            if branch not in refs:
                raise HubError(404, f"Invalid rev id: {branch}", "RevisionNotFound")
            parent = refs[branch]
            header = next((line["value"] for line in lines if line["key"] == "header"), {})
            sha = hashlib.sha1(f"{parent}{time.time_ns()}{json.dumps(lines)[:1000]}".encode()).hexdigest()
            target = folder / "commits" / sha
            shutil.copytree(folder / "commits" / parent, target)
            for line in lines:
                value = line["value"]
                path = target / value.get("path", "")
                if not path.resolve().is_relative_to(target.resolve()):
                    raise HubError(400, f"invalid path {value.get('path')!r}")
                if line["key"] == "file":
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(base64.b64decode(value["content"]))
                elif line["key"] == "deletedFile":
                    path.unlink(missing_ok=True)
                elif line["key"] == "deletedFolder":
                    shutil.rmtree(path, ignore_errors=True)
                elif line["key"] == "lfsFile":
                    raise HubError(400, "this test server takes regular (inline) files only")
            self._write_commit_meta(folder, sha, parent, header.get("summary", ""))
            refs[branch] = sha
            (folder / "refs.json").write_text(json.dumps(refs))
            return sha

    @staticmethod
    def _write_commit_meta(folder: Path, sha: str, parent: str | None, message: str) -> None:
        meta = {"parent": parent, "message": message, "time": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())}
        (folder / "commits" / sha / ".commit.json").write_text(json.dumps(meta))

    def commit_time(self, repo_id: str, sha: str) -> str:
        return json.loads((self.snapshot(repo_id, sha) / ".commit.json").read_text())["time"]


class HubHandler(BaseHTTPRequestHandler):
    storage: HubStorage
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet, but every request is recorded for the tests
        self.server.requests.append(f"{self.command} {self.path} {self.headers.get('Authorization', '')}")

    # ---- plumbing -----------------------------------------------------------------------------------------------
    def _user(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return self.storage.user(auth.removeprefix("Bearer ").strip()) if auth.startswith("Bearer ") else None

    def _require_user(self) -> str:
        user = self._user()
        if user is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        return user

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value, status: int = 200) -> None:
        self._send(status, json.dumps(value).encode())

    def _dispatch(self) -> None:
        # read the whole body first: a request refused before its body is read would leave it on the kept-alive
        # connection, where it would prefix the next request line
        self.request_body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            self._route()
        except HubError as error:
            headers = {"X-Error-Message": error.message}
            if error.code:
                headers["X-Error-Code"] = error.code
            self._send(error.status, json.dumps({"error": error.message}).encode(), headers)

    do_GET = do_POST = do_HEAD = _dispatch

    def _endpoint(self) -> str:
        return f"http://{self.headers['Host']}"

    def _write_access(self, repo_id: str) -> None:
        user = self._require_user()
        meta = self.storage.meta(repo_id, user)
        if meta["owner"] != user and not repo_id.startswith(f"{user}/"):
            raise HubError(403, f"You don't have the rights to write to {repo_id}")

    # ---- routes -------------------------------------------------------------------------------------------------
    def _route(self) -> None:
        url = urlparse(self.path)
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        query = parse_qs(url.query)
        if self.command == "GET" and url.path == "/api/whoami-v2":
            user = self._require_user()
            return self._json({"type": "user", "name": user, "auth": {"accessToken": {"role": "write"}}})
        if self.command == "POST" and url.path == "/api/validate-yaml":
            return self._validate_yaml(json.loads(self.request_body or b"{}").get("content", ""))
        if self.command == "POST" and url.path == "/api/repos/create":
            return self._create_repo(json.loads(self.request_body or b"{}"))
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo_id = "/".join(parts[2:4])
            rest = parts[4:]
            if not rest:
                return self._info(repo_id, "main")
            action = rest[0]
            if action == "revision" and self.command == "GET":
                return self._info(repo_id, "/".join(rest[1:]))
            if action == "preupload" and self.command == "POST":
                return self._preupload(repo_id, "/".join(rest[1:]))
            if action == "commit" and self.command == "POST":
                return self._commit(repo_id, "/".join(rest[1:]))
            if action == "branch" and self.command == "POST":
                return self._branch(repo_id, "/".join(rest[1:]))
            if action == "tree" and self.command == "GET":
                return self._tree(repo_id, rest[1], "/".join(rest[2:]), query.get("recursive", ["false"])[0])
        if len(parts) >= 5 and parts[2] == "resolve" and self.command in ("GET", "HEAD"):
            return self._resolve("/".join(parts[:2]), parts[3], "/".join(parts[4:]))
        raise HubError(404, f"no route for {self.command} {url.path}")

    def _create_repo(self, payload: dict) -> None:
        user = self._require_user()
        if payload.get("type", "model") != "model":
            raise HubError(400, "this test server hosts model repositories only")
        owner = payload.get("organization") or user
        if owner != user:
            raise HubError(403, f"You cannot create repositories in {owner}")
        repo_id = f"{owner}/{payload['name']}"
        private = payload.get("visibility") == "private" or bool(payload.get("private"))
        url = f"{self._endpoint()}/{repo_id}"
        try:
            self.storage.create_repo(repo_id, user, private)
        except HubError as error:  # as the Hub: a conflict still names the existing repository
            return self._json({"error": error.message, "url": url}, status=error.status)
        self._json({"url": url, "name": repo_id})

    def _validate_yaml(self, content: str) -> None:
        """README metadata check before a commit: the front matter must be closed (the Hub also checks its schema)."""
        if content.startswith("---") and "\n---" not in content[3:]:
            self._json({"errors": [{"message": "unclosed YAML front matter"}]}, status=400)
        else:
            self._json({"errors": [], "warnings": []})

    def _info(self, repo_id: str, revision: str) -> None:
        meta = self.storage.meta(repo_id, self._user())
        sha = self.storage.resolve(repo_id, revision)
        root = self.storage.snapshot(repo_id, sha)
        siblings = [{"rfilename": str(p.relative_to(root))} for p in self.storage.files(repo_id, sha)]
        self._json(
            {
                "_id": repo_id,
                "id": repo_id,
                "modelId": repo_id,
                "author": repo_id.split("/")[0],
                "sha": sha,
                "private": meta["private"],
                "gated": False,
                "disabled": False,
                "downloads": 0,
                "likes": 0,
                "lastModified": self.storage.commit_time(repo_id, sha),
                "tags": [],
                "siblings": siblings,
            }
        )

    def _preupload(self, repo_id: str, revision: str) -> None:
        self._write_access(repo_id)
        sha = self.storage.resolve(repo_id, revision)
        root = self.storage.snapshot(repo_id, sha)
        files = json.loads(self.request_body)["files"]
        answer = []
        for file in files:
            existing = root / file["path"]
            oid = git_blob_sha1(existing.read_bytes()) if existing.is_file() else None
            answer.append({"path": file["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": oid})
        self._json({"files": answer, "commitOid": sha})

    def _commit(self, repo_id: str, revision: str) -> None:
        self._write_access(repo_id)
        lines = [json.loads(line) for line in self.request_body.splitlines() if line.strip()]
        sha = self.storage.commit(repo_id, revision, lines)
        self._json({"success": True, "commitOid": sha, "commitUrl": f"{self._endpoint()}/{repo_id}/commit/{sha}"})

    def _branch(self, repo_id: str, branch: str) -> None:
        self._write_access(repo_id)
        body = json.loads(self.request_body or b"{}")
        self.storage.create_branch(repo_id, branch, body.get("startingPoint") or "main")
        self._json({})

    def _tree(self, repo_id: str, revision: str, path: str, recursive: str) -> None:
        self.storage.meta(repo_id, self._user())
        sha = self.storage.resolve(repo_id, revision)
        root = self.storage.snapshot(repo_id, sha)
        base = root / path
        if not base.exists():
            raise HubError(404, f"{path} does not exist at {revision}", "EntryNotFound")
        entries = base.rglob("*") if recursive == "true" else base.iterdir()
        listing = []
        for entry in sorted(entries):
            if entry.name == ".commit.json":
                continue
            relative = str(entry.relative_to(root))
            if entry.is_dir():
                listing.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": relative})
            else:
                data = entry.read_bytes()
                listing.append({"type": "file", "oid": git_blob_sha1(data), "size": len(data), "path": relative})
        self._json(listing)

    def _resolve(self, repo_id: str, revision: str, path: str) -> None:
        self.storage.meta(repo_id, self._user())
        sha = self.storage.resolve(unquote(repo_id), unquote(revision))
        file = self.storage.snapshot(repo_id, sha) / path
        if not file.is_file() or file.name == ".commit.json":
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound")
        data = file.read_bytes()
        headers = {"X-Repo-Commit": sha, "ETag": f'"{git_blob_sha1(data)}"', "Accept-Ranges": "bytes"}
        self._send(200, data, headers, content_type="application/octet-stream")


class HubServer:
    """``with HubServer(root, {"token": "user"}) as hub:`` serves on ``hub.endpoint`` until the block ends."""

    def __init__(self, root: Path, tokens: dict[str, str]):
        handler = type("Handler", (HubHandler,), {"storage": HubStorage(Path(root), tokens)})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.requests = []
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def requests(self) -> list[str]:
        return self.httpd.requests

    def history(self, repo_id: str, branch: str = "main") -> list[tuple[str, set[str]]]:
        """The commits of ``branch``, oldest first: each one's message and the paths of the files it holds."""
        storage = self.httpd.RequestHandlerClass.storage
        commits, sha = [], storage.resolve(repo_id, branch)
        while sha is not None:
            snapshot = storage.snapshot(repo_id, sha)
            files = {path.relative_to(snapshot).as_posix() for path in storage.files(repo_id, sha)}
            meta = json.loads((snapshot / ".commit.json").read_text())
            commits.append((meta["message"], files))
            sha = meta["parent"]
        return commits[::-1]

    def __enter__(self) -> "HubServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
