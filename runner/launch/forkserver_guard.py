"""Imported first by the launcher's forkserver (see worker.PRELOAD): the forkserver dies with ``mcpfleet run``.

The forkserver notices its parent's death only between forks, after its preload (seconds of imports) is done;
a run killed with SIGKILL during the preload left it running. No watchdog thread here: the forkserver forks
workers, and forking a process with a second thread running is unsafe. The parent-death signal needs none.
"""

from __future__ import annotations

import signal

from mcpfleet.runner._util.lifeline import parent_death_signal

parent_death_signal(signal.SIGKILL)
