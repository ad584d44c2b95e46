"""A stand-in for Windows on Linux, imported by a .pth file before anything else runs in every interpreter of
a test venv: it takes away what Windows lacks, so the grader's path without fork is exercised here.

Gone: os.fork and the process-group calls, resource and fcntl, descriptor passing over sockets, the
POSIX-only signals and alarms, and Popen's POSIX-only arguments (Windows refuses preexec_fn and pass_fds).
Popen.kill keeps working, as TerminateProcess does on Windows.
"""
import os
import signal
import socket
import subprocess
import sys

for name in ("fork", "forkpty", "killpg", "setsid", "setpgid", "getpgid", "setpgrp", "register_at_fork_unused"):
    if hasattr(os, name):
        delattr(os, name)
for name in ("resource", "fcntl"):
    sys.modules[name] = None  # `import resource` now raises ImportError, as on Windows
for name in ("send_fds", "recv_fds"):
    if hasattr(socket, name):
        delattr(socket, name)
for name in ("SIGKILL", "SIGALRM", "SIGXFSZ", "SIGCHLD", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGQUIT", "SIGSTOP",
             "alarm", "setitimer", "getitimer", "pause", "siginterrupt", "ITIMER_REAL"):
    if hasattr(signal, name):
        delattr(signal, name)

_init = subprocess.Popen.__init__


def _windows_popen(self, *args, **kwargs):
    for arg in ("preexec_fn", "pass_fds", "start_new_session", "process_group"):
        if kwargs.get(arg):
            raise ValueError(f"{arg} is not supported on Windows platforms (attnlab no-fork stand-in)")
    return _init(self, *args, **kwargs)


def _kill(self):
    if self.returncode is None:
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass


subprocess.Popen.__init__ = _windows_popen
subprocess.Popen.kill = _kill
os.environ["ATTNLAB_STANDIN"] = "nofork"
