"""Promises of the daemon that a planted bug once broke unseen (issue 22, item 1).

The shared-memory segment's seals: the daemon makes every segment itself (a memfd) and seals it
before the client ever sees it, against shrinking, growing and any change of the seals
(``F_SEAL_SEAL``). A client never hands the daemon a descriptor (the daemon reads its socket
with ``recv``, which drops ``SCM_RIGHTS``), so every segment a call can name is one of these,
and because the seals can never be lifted, the check made at creation holds for every later
use: a client that tries to shrink its segment under a call (which would make the daemon fault
with ``SIGBUS`` on its next access) is refused by the kernel, and the calls go on working.

The socket's file mode: as the policy says (``socket_mode``, ``socket_group``), 0600 and the
daemon's own group without a policy, so another uid cannot even connect.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import socket
import stat
from typing import Any

import pytest
from Crypto.Cipher import DES3
from daemon_support import MODULES, NOBODY, run_as, running_as_root

from juggle.daemon import client as client_module
from juggle.daemon.protocol import ShmRef
from juggle.errors import ProtocolError

KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
#: Every seal a segment must carry: it cannot shrink, grow, or have its seals changed.
SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
SIZE = 16 << 10  # over the client's shared-memory threshold (8 KiB)


def reference(data: bytes) -> bytes:
    return bytes(DES3.new(KEY, DES3.MODE_ECB).encrypt(data))


def test_a_segment_is_sealed_for_good_and_a_shrink_under_the_daemon_is_refused(
    spawn: Any,
) -> None:
    daemon = spawn()
    with daemon.client() as client:
        client.install(MODULES / "tdes")
        enc = client.get_service("EncryptionService")
        enc.load_key(KEY)
        link = client._current_link()
        answered = link.request({"op": "segment", "size": SIZE}, 10.0)
        assert answered.reply is not None and answered.fd is not None
        seg_id, fd = int(answered.reply["ok"]["seg"]), answered.fd
        try:
            assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS == SEALS
            for size in (0, SIZE // 2, SIZE * 2):  # shrink (the daemon would fault) or grow
                with pytest.raises(PermissionError):
                    os.ftruncate(fd, size)
            with pytest.raises(PermissionError):  # F_SEAL_SEAL: no seal can be added or lifted
                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
            assert os.fstat(fd).st_size == SIZE
            mm = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)
        # the daemon uses the segment after the attempts: the call works on it in place
        link.segments[seg_id] = client_module._Segment(seg_id, SIZE, mm)
        plain = bytes(range(256)) * (SIZE // 256)
        mm[:] = plain
        for _ in range(2):  # and on every later use
            view = memoryview(mm)
            assert link.locate(view) is not None  # it travels as the segment, not inline
            assert enc.encrypt(view, SIZE) == SIZE
            view.release()
            assert mm[:] == reference(plain)
            mm[:] = plain
        assert daemon.alive
        assert {m.name for m in client.modules()} == {"tdes"}


def test_a_call_names_only_a_sealed_segment_of_its_own_connection(spawn: Any) -> None:
    """Every use looks the segment up among the ones the daemon made (and sealed) for this
    connection, and the range up inside it: another connection's segment, an id never made
    and a range past the end are refused with ProtocolError, and nothing is written."""
    daemon = spawn()
    with daemon.client() as owner, daemon.client() as other:
        owner.install(MODULES / "tdes")
        theirs = other.buffer(SIZE)
        theirs[:] = bytes(SIZE)
        enc = owner.get_service("EncryptionService")
        enc.load_key(KEY)
        mine = owner.buffer(SIZE)
        link = owner._current_link()
        handle = enc._handle  # the remote proxy's handle on this connection
        own_id = mine._segment.segment_id
        bad = {
            "another connection's": ShmRef(theirs._segment.segment_id, 0, SIZE),
            "never made": ShmRef(own_id + 1000, 0, SIZE),
            "past its end": ShmRef(own_id, 8, SIZE),
        }
        for why, ref in bad.items():
            with pytest.raises(ProtocolError, match="segment") as caught:
                link.request({"op": "call", "h": handle, "m": "encrypt", "args": [ref, SIZE]}, 10)
            assert str(ref.segment) in str(caught.value), why
        assert bytes(theirs) == bytes(SIZE)
        mine[:] = bytes(SIZE)
        assert enc.encrypt(mine, SIZE) == SIZE  # its own segment, in range: served
        assert bytes(mine) == reference(bytes(SIZE))


# -- the socket's file mode ----------------------------------------------------------------------


def _connect_errno(path: str) -> str:
    """As another uid: what connecting to ``path`` gives ("ok" or the errno's name)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))
    finally:
        probe.close()


@pytest.mark.skipif(not running_as_root(), reason="needs root to set the socket's group")
def test_the_socket_has_the_mode_and_group_the_policy_sets(spawn: Any) -> None:
    daemon = spawn(
        f'version = 1\nadmin_uids = [0]\nsocket_mode = "0660"\nsocket_group = {NOBODY}\n'
    )
    info = daemon.socket.lstat()
    assert stat.S_ISSOCK(info.st_mode)
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (0o660, 0, NOBODY)
    # the group reaches the socket (the daemon then judges the uid: nobody is no tenant here)
    assert run_as(NOBODY, _connect_errno, str(daemon.socket)) == "ok"


@pytest.mark.skipif(not running_as_root(), reason="needs a second uid (setuid in a child)")
def test_without_a_policy_the_socket_is_the_daemons_alone(spawn: Any) -> None:
    daemon = spawn()
    info = daemon.socket.lstat()
    assert stat.S_ISSOCK(info.st_mode)
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (
        0o600,
        os.geteuid(),
        os.getegid(),
    )
    assert run_as(NOBODY, _connect_errno, str(daemon.socket)) == "EACCES"
    with daemon.client() as admin:
        assert admin.admin
