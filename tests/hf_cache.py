"""A Hugging Face hub cache written as huggingface_hub writes it, without a network.

`cache_repo(cache, repo, files)` lays out `models--OWNER--NAME/{blobs,snapshots/<commit>,refs/main}`
with huggingface_hub's own pieces: the folder name (`repo_folder_name`), blob names (the SHA-256
of an LFS file, the git blob SHA-1 of a small one, as the hub's ETags are), relative symlinks from
the snapshot to the blobs (`_create_symlink`, the function `hf_hub_download` uses) and `refs/main`
holding the commit (no newline). Tests then check that the library itself reads it back.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")


def folder_files(folder: Path, prefix: str = "") -> dict[str, bytes]:
    """{repo path: bytes} of every file under `folder`, under `prefix` (a repo subfolder)."""
    return {prefix + p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def cache_repo(cache: Path, repo: str, files: dict[str, bytes], commit: str | None = None) -> Path:
    """Put `files` ({repo path: bytes}) into the cache at `cache` as `repo`'s snapshot at `main`;
    returns the snapshot folder."""
    from huggingface_hub.file_download import _create_symlink, repo_folder_name
    from huggingface_hub.utils.sha import git_hash

    storage = Path(cache) / repo_folder_name(repo_id=repo, repo_type="model")
    commit = commit or hashlib.sha1(f"{repo}:{sorted(files)}".encode()).hexdigest()
    snapshot = storage / "snapshots" / commit
    for path, data in files.items():
        etag = hashlib.sha256(data).hexdigest() if path.endswith(LFS_SUFFIXES) else git_hash(data)
        blob = storage / "blobs" / etag
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists():
            blob.write_bytes(data)
        pointer = snapshot / path
        pointer.parent.mkdir(parents=True, exist_ok=True)
        _create_symlink(str(blob), str(pointer), new_blob=False)
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / "main").write_text(commit)
    return snapshot
