"""The output directory's lock leaves nothing behind a run that wrote nothing: a folder it made holding only the
lock is removed on release; a folder that was there, or that holds the run's files, stays (the lock emptied)."""

from training.run.run_lock import LOCK_FILE, OutputDirLock


def test_a_folder_the_lock_made_and_nothing_else_wrote_is_removed(tmp_path):
    lock = OutputDirLock(tmp_path / "runs" / "new").acquire()
    assert (tmp_path / "runs" / "new" / LOCK_FILE).read_text().startswith('{"pid": ')
    lock.release()
    assert not (tmp_path / "runs" / "new").exists() and (tmp_path / "runs").is_dir()


def test_a_folder_that_was_there_or_holds_files_stays(tmp_path):
    OutputDirLock(tmp_path).acquire().release()  # there before
    assert [p.name for p in tmp_path.iterdir()] == [LOCK_FILE] and (tmp_path / LOCK_FILE).read_text() == ""
    lock = OutputDirLock(tmp_path / "run").acquire()
    (tmp_path / "run" / "tokenizer.json").write_text("{}")  # the run wrote something
    lock.release()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [LOCK_FILE, "tokenizer.json"]
