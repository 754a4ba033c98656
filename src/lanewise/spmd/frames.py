"""What the W-wide emitter (:mod:`.transform`) keeps while it emits a lane: the
activation of a function being emitted (:class:`Frame`) and the masks around the
statement being emitted (:class:`Ctx`)."""

from __future__ import annotations

import types
from dataclasses import dataclass, field


@dataclass
class Frame:
    """One function activation being emitted (the lane, or an inlined helper)."""

    fn: types.FunctionType
    prefix: str  # "l_" for the lane's locals, "h3_" for the third inlined helper
    locals: set
    alive: str  # mask of lanes that have not returned yet
    base: int  # index of ``alive`` in the mask chain
    shape: object = "unknown"  # result shape: None (scalar), tuple of shapes, "unknown" before the first return
    slots: list = field(default_factory=list)  # result slot variables (one per result leaf)
    counts: dict = field(default_factory=dict)  # uses of each (renamed) local in the frame
    selected: set = field(default_factory=set)  # locals stored under a mask somewhere (need a declaration)
    rows: dict = field(default_factory=dict)  # parameter -> Row (a per-lane 1-D array)
    tuples: dict = field(default_factory=dict)  # local -> Tup of variables (a tuple bound to a name)
    nones: set = field(default_factory=set)  # result slots some return sets to None
    valued: set = field(default_factory=set)  # result slots some return sets to a value
    lockstep: frozenset = frozenset()  # (line, column) of the loops every live lane runs together (.uniform)

    def name(self, local: str) -> str:
        return self.prefix + local


@dataclass(frozen=True)
class Ctx:
    """Where a statement is emitted: its mask and the masks around it."""

    chain: tuple  # mask variables, the frame's alive mask at frame.base, the current mask last
    plain: bool  # stores need no select (frame top level)
    temps: frozenset  # block temporaries (plain stores) of the current block
    loop: tuple | None  # (index of the loop mask, index of the iteration mask) in chain
    frame: Frame
    private_plain: bool = True  # loop counters stored without select (not in a streamed prologue)
    renames: dict | None = None  # a branch computed into temporaries: local -> its temporary
    whole: bool = False  # the mask is the frame's live lanes (a lockstep loop): stores need no select

    @property
    def mask(self) -> str:
        return self.chain[-1]
