"""Signed per-push results: the Classroom 50 autograder signs the result it writes, on a runner that holds the key.

The signing key is an Ed25519 key derived from the seal key (HKDF-SHA256, info `INFO`): the runner already keeps
that one secret from the student, so there is nothing new to install or leak, and `grade release --new-key`
rotates both. Ed25519 means checking needs only the public key, which `grade release classroom50` writes beside
the release (attestation.json), so whoever checks the class never holds the seal key.

What is signed (`statement`): the attestation's version, the classroom, the assignment, the repository
(GITHUB_REPOSITORY), the commit (GITHUB_SHA), the submission tag, the score, the maximum, each test's name,
passed, score and maximum, and the digest of the autograder folder that graded (`bundle_digest`). Not the fields
Classroom 50's runner rewrites after the autograder exits (owner, assignment_type, datetime, graded_at,
submitted_by), nor the hints. The signature travels as the key `attestation` of the first test (`FIELD`): the
result document's top level is closed (its schema allows no other key), while a test's extra keys are kept as
they are by the runner's rewrite, by the score collector and in the file `gh teacher download` writes.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

VERSION = "attnlab-attestation/v1"
INFO = b"attnlab classroom50 result attestation v1"  # HKDF's info: a new version derives another key
FIELD = "attestation"
RELEASE_FILE = "attestation.json"  # what `grade release classroom50` writes beside the release: no secret in it
RELEASE_SCHEMA = "attnlab/attestation-key/v1"


class Unsigned(Exception):
    """The document carries no attestation."""


class Forged(Exception):
    """The document's attestation does not hold for it; str() says why."""


@dataclass(frozen=True)
class Signed:
    """What a valid signature says was graded, besides the document's own fields it covers."""

    repository: str
    commit: str
    bundle: str
    key: str


def signing_key(seal_key: bytes):
    """The Ed25519 private key derived from the seal key (its file's text, surrounding blanks aside)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    seed = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=INFO).derive(seal_key.strip())
    return Ed25519PrivateKey.from_private_bytes(seed)


def _raw(public) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public_raw: bytes) -> str:
    """A short name for a public key, to tell two keys apart in a message."""
    return hashlib.sha256(public_raw).hexdigest()[:16]


def public_key(seal_key: bytes) -> str:
    """The public half of the derived key, base64 (what attestation.json holds)."""
    return base64.b64encode(_raw(signing_key(seal_key).public_key())).decode()


def bundle_digest(folder: Path) -> str:
    """SHA-256 over the autograder folder's files in order of path (each its path, size and bytes), Python's
    caches left out: the runner writes __pycache__ into the folder it runs from, and nothing else."""
    h = hashlib.sha256()
    files = sorted((p.relative_to(folder).as_posix(), p) for p in folder.rglob("*")
                   if "__pycache__" not in p.parts and p.suffix != ".pyc" and p.is_file() and not p.is_symlink())
    for name, path in files:
        data = path.read_bytes()
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def statement(doc: dict, *, repository: str, commit: str, bundle: str) -> bytes:
    """The bytes signed for `doc`: canonical JSON of the fields the signature covers, as the document holds them
    (a score written 73.0 or "73" is another statement than 73)."""
    tests = doc.get("tests") if isinstance(doc.get("tests"), list) else []
    body = {"version": VERSION, "classroom": doc.get("classroom"), "assignment": doc.get("assignment"),
            "repository": repository, "commit": commit, "submission": doc.get("submission"),
            "score": doc.get("score"), "max-score": doc.get("max-score"), "bundle": bundle,
            "tests": [[t.get("test-name"), t.get("passed"), t.get("score"), t.get("max-score")]
                      if isinstance(t, dict) else None for t in tests]}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sign(doc: dict, seal_key: bytes, *, repository: str, commit: str, bundle: str) -> dict:
    """`doc` with its attestation on the first test; a document without tests has nothing to sign."""
    if not doc.get("tests"):
        raise ValueError("the result has no test to carry its signature")
    private = signing_key(seal_key)
    signature = private.sign(statement(doc, repository=repository, commit=commit, bundle=bundle))
    tests = [dict(t) for t in doc["tests"]]
    tests[0][FIELD] = {"version": VERSION, "repository": repository, "commit": commit, "bundle": bundle,
                       "key": key_id(_raw(private.public_key())), "signature": base64.b64encode(signature).decode()}
    return {**doc, "tests": tests}


def carried(doc: dict) -> dict:
    """The document's attestation (raises Unsigned where there is none, Forged where it is not on the first test or
    not an attestation's shape)."""
    tests = doc.get("tests") if isinstance(doc.get("tests"), list) else []
    found = [i for i, t in enumerate(tests) if isinstance(t, dict) and FIELD in t]
    if not found:
        raise Unsigned("no attestation")
    if found != [0]:
        raise Forged(f"an attestation sits on test {found[-1] + 1}, not only on the first, where the autograder "
                     "puts it")
    att = tests[0][FIELD]
    keys = ("version", "repository", "commit", "bundle", "key", "signature")
    if not isinstance(att, dict) or not all(isinstance(att.get(k), str) for k in keys):
        raise Forged("its attestation is not one the autograder writes (a field is missing or not text)")
    if att["version"] != VERSION:
        raise Forged(f"its attestation's version {att['version'][:40]!r} is not {VERSION!r}")
    return att


def verify(doc: dict, public_b64: str) -> Signed:
    """What the document's valid signature says was graded; raises Unsigned or Forged (the signature does not
    hold for the document: a covered field was changed, or another key signed it)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    att = carried(doc)
    raw = base64.b64decode(public_b64)
    try:
        signature = base64.b64decode(att["signature"], validate=True)
        Ed25519PublicKey.from_public_bytes(raw).verify(
            signature, statement(doc, repository=att["repository"], commit=att["commit"], bundle=att["bundle"]))
    except (InvalidSignature, binascii.Error, ValueError):
        mine = key_id(raw)
        other = f"; it names another key ({att['key'][:16]!r}, the release's is {mine})" if att["key"] != mine else ""
        raise Forged("the signature does not match the document: a field it covers (a score, a test, the "
                     f"submission, classroom or assignment) was changed after signing{other}") from None
    return Signed(att["repository"], att["commit"], att["bundle"], att["key"])
