"""Keeping one rank's failure from hanging the others: the job's abort, timed waits, who is missing.

* **Abort.**  Once ``init_process_group`` has run in a job of several processes, an uncaught
  exception on any rank prints ``rank N`` and its traceback to stderr, then ``MPI_Abort`` ends every
  process of the job (what ``python -m mpi4py`` does): the others would otherwise wait for this one
  in their next collective.
* **Timed waits.**  Every wait of the group (a collective, a DDP bucket, ``barrier``, the metadata
  checks) tests its request, then sleeps between tests with pauses that grow to 1 ms: MPI moves a
  collective along only inside MPI calls, and a few tests finish even a large one, so the pause
  costs little time and spares the core that a blocking MPI wait spins on.  Past the group's
  timeout it raises a ``TimeoutError`` that names the collective and the ranks that did not arrive.
* **Who is missing.**  A second communicator carries small messages that collectives never match.
  A rank whose wait timed out asks every other rank where it is; a rank that is waiting in the
  group answers with the collective it waits in, so a rank that does not answer did not arrive.
  A process that exits with the group still up (``sys.exit``, or the end of its script) tells the
  others, so that a rank waiting for it raises about a second later instead of at the timeout.
"""

from __future__ import annotations

import pickle
import sys
import time
import traceback
from array import array
from itertools import accumulate
from typing import Any, Callable, Dict, List, Optional, Tuple

#: tags of the side communicator's messages
QUERY, REPLY, EXIT = 1, 2, 3
FIRST_PAUSE, LONGEST_PAUSE = 2e-5, 1e-3
#: how long a rank whose wait timed out listens for the others' answers (waiting ranks answer within
#: milliseconds; the rest covers a loaded machine)
ANSWER_WAIT = 2.0
#: how long a rank waits for a collective to land after learning that a rank of it has exited (what
#: that rank sent before it exited may still be on its way)
LANDING = 1.0

Where = Tuple[str, int]  # what a rank waits in, and the group's collective number of that wait


def poll(done: Callable[[], bool], deadline: float, between: Callable[[], bool]) -> bool:
    """Test ``done`` until it is true (True), until ``deadline`` on ``time.monotonic()`` or until
    ``between``, called between tests, is true (False)."""
    pause = FIRST_PAUSE
    while not done():
        now = time.monotonic()
        if now >= deadline or between():
            return False
        time.sleep(min(pause, deadline - now))
        pause = min(2 * pause, LONGEST_PAUSE)
    return True


def _ranks(ranks: List[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


def timeout_message(what: str, seq: int, rank: int, size: int, timeout: float,
                    answers: Dict[int, Where], exited: Dict[int, int]) -> str:
    """The error of a wait that timed out: for each other rank, whether it waits here too, waits in
    another collective, has exited, or did not answer (did not arrive)."""
    here = [r for r, w in sorted(answers.items()) if w == (what, seq) and r not in exited]
    missing = [r for r in range(size) if r != rank and r not in answers and r not in exited]
    parts = [f"{_ranks(missing)} did not arrive (no answer: busy elsewhere, stuck, or gone)"] if missing else []
    parts += [f"rank {r} waits in {w} (the group's collective #{s})" for r, (w, s) in sorted(answers.items())
              if (w, s) != (what, seq) and r not in exited]
    parts += [f"rank {r} has exited" for r in sorted(exited)]
    if here:
        parts.append(f"{_ranks(here)} {'waits' if len(here) == 1 else 'wait'} here too")
    return (f"{what}: timed out after {timeout:g} s on rank {rank} of {size}, in the group's collective #{seq}: "
            f"{'; '.join(parts)}. A rank that caught an error and skipped a collective, or ran one step more "
            "than the others, leaves them waiting; if a rank is only slow (a long evaluation or checkpoint on "
            "one rank), give init_process_group(timeout=seconds) more time.")


def left_message(what: str, seq: int, rank: int, exited: Dict[int, int]) -> str:
    """The error of a wait for a collective that a rank whose process exits will never join."""
    gone = "; ".join(f"rank {r} after {n} of the group's collectives" for r, n in sorted(exited.items()))
    return (f"{what}: {_ranks(sorted(exited))} left the job (the process is exiting: sys.exit or the end of its "
            f"script: {gone}) while rank {rank} waits for it here, in the group's collective #{seq}. Every rank "
            "must make the same collectives: did it stop early, or run fewer steps?")


class Watch:
    """The group's clock and side channel: numbers its collectives, waits for them under the
    timeout, and finds out where the other ranks are (see the module docstring)."""

    def __init__(self, comm: Any, side: Any, MPI: Any, timeout: float) -> None:
        self.comm = comm
        self.side = side
        self.MPI = MPI
        self.timeout = timeout
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.count = 0
        self.waiting: Optional[Where] = None
        self.answers: Dict[int, Where] = {}
        self.exited: Dict[int, int] = {}
        self._asked = 0
        self._sends: List[Any] = []
        self._status = MPI.Status()

    def start(self) -> int:
        """The number of a new collective of the group: the same on every rank that makes the same ones."""
        self.count += 1
        return self.count

    def wait(self, done: Callable[[], bool], what: str, seq: int) -> None:
        """Test ``done`` until it is true; raise if a rank of the group has exited or at the timeout."""
        if done():
            return
        self.waiting = (what, seq)
        try:
            if poll(done, time.monotonic() + self.timeout, self._listen):
                return
            if self.exited:
                if poll(done, time.monotonic() + LANDING, self._hear):
                    return
                raise RuntimeError(left_message(what, seq, self.rank, self.exited))
            self._ask(what, seq)
            raise TimeoutError(timeout_message(what, seq, self.rank, self.size, self.timeout, self.answers,
                                               self.exited))
        finally:
            self.waiting = None

    def exchange(self, obj: Any, what: str) -> list:
        """Every rank's picklable ``obj``, in rank order: an all-gather under the timeout."""
        seq = self.start()
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        sizes = array("q", bytes(8 * self.size))
        self.wait(self.comm.Iallgather(array("q", [len(data)]), sizes).Test, what, seq)
        joined = bytearray(sum(sizes))
        offsets = [0, *accumulate(sizes)][:-1]
        byte = self.MPI.BYTE
        self.wait(self.comm.Iallgatherv([data, byte], [joined, (sizes, offsets), byte]).Test, what, seq)
        return [pickle.loads(joined[o:o + n]) for o, n in zip(offsets, sizes)]

    def farewell(self) -> None:
        """Tell the other ranks that this process is exiting (they stop waiting for it)."""
        for r in range(self.size):
            if r != self.rank:
                self._send(r, EXIT, self.count)

    def _send(self, dest: int, tag: int, message: Any) -> None:
        self._sends = [s for s in self._sends if not s.Test()]
        self._sends.append(self.side.isend(message, dest=dest, tag=tag))

    def _listen(self) -> bool:
        """Take the side channel's messages (answering questions); whether a rank has exited."""
        status = self._status
        while self.side.Iprobe(self.MPI.ANY_SOURCE, self.MPI.ANY_TAG, status):
            source, tag = status.Get_source(), status.Get_tag()
            message = self.side.recv(source=source, tag=tag)
            if tag == QUERY:  # a rank whose wait timed out: where it waits, and where this one does
                self.answers[source] = message
                self._send(source, REPLY, (self.waiting, message[1]))
            elif tag == REPLY:
                where, asked = message
                if asked == self._asked:
                    self.answers[source] = where
            else:
                self.exited[source] = message
        return bool(self.exited)

    def _hear(self) -> bool:
        """``_listen`` for a wait that goes on whatever it hears."""
        self._listen()
        return False

    def _ask(self, what: str, seq: int) -> None:
        """Ask every other rank where it waits and collect the answers for up to ANSWER_WAIT seconds."""
        self.answers = {}
        self._asked = seq
        for r in range(self.size):
            if r != self.rank:
                self._send(r, QUERY, (what, seq))

        def all_heard() -> bool:
            return len(set(self.answers) | set(self.exited)) >= self.size - 1

        poll(all_heard, time.monotonic() + min(ANSWER_WAIT, self.timeout), self._hear)


#: seconds between printing the reason for an abort and ``MPI_Abort``, for mpiexec to forward the text
ABORT_GRACE = 0.5


class _AbortOnUncaught:
    """``sys.excepthook`` of a rank: print the rank and the traceback, then end the whole job."""

    def __init__(self, MPI: Any) -> None:
        self.MPI = MPI

    def __call__(self, kind: type, value: BaseException, tb: Any) -> None:
        world = self.MPI.COMM_WORLD
        text = "".join(traceback.format_exception(kind, value, tb))
        try:
            sys.stdout.flush()
            sys.stderr.write(f"namedtensor.distributed: rank {world.Get_rank()} of {world.Get_size()} raised "
                             f"{kind.__name__}, uncaught; aborting the job (MPI_Abort) so that no rank waits for it.\n"
                             f"{text}")
            sys.stderr.flush()
            # mpiexec forwards a rank's output through its proxy in its own time, and MPI_Abort ends the
            # proxies too: output still on its way would be lost, and with it the reason for the abort
            time.sleep(ABORT_GRACE)
        finally:
            world.Abort(1)


def abort_on_uncaught_exceptions(MPI: Any) -> None:
    """Make an uncaught exception on this rank end the whole job (once per process; not in a job of one)."""
    if MPI.COMM_WORLD.Get_size() > 1 and not isinstance(sys.excepthook, _AbortOnUncaught):
        sys.excepthook = _AbortOnUncaught(MPI)
