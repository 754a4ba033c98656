"""The lane IR's nodes: frozen dataclasses, one kind per thing a lane can say.

A lane and the Python helpers it calls are parsed once (:mod:`.build`) into:

* **expressions**: :class:`Var` (a local), :class:`Const` (a literal),
  :class:`Global` (a global, closure or builtin value, by its dotted name),
  :class:`Prim` (a primitive: ``op`` is the key of a primitive table, e.g.
  ``"add"``, ``"lt"``, ``"getitem"``, ``"math.sqrt"``, ``"np.exp"``,
  ``"lw.random.normal"``, ``"call:helper"``), :class:`Lambda`, :class:`Comp`
  (comprehensions) and :class:`Unsupported`;
* **statements**: :class:`Assign`, :class:`Do` (an expression run for its effect,
  ``setitem`` included), :class:`If`, :class:`Loop` (``range``/``iter``/``while``
  with its loop-carried names), :class:`Exit` (``break``/``continue``/``return``),
  :class:`Raise`, :class:`Try`, :class:`Assert`, :class:`Def` (a nested function)
  and :class:`Unsupported` (a construct the IR does not model, with its place);
* :class:`Function` and :class:`LaneModule` (the lane and its helpers, each once).

Every node that the user wrote keeps its :class:`Loc` (file, line, column) for
errors.  ``type`` slots hold what the source alone tells (a literal's kind, a
comparison's ``bool``); None means unknown, never a guess.

Example:
    >>> Prim("add", (Var("x"), Const(1, "int")), Loc("f.py", 2, 11)).args[1].type
    'int'
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Union


@dataclass(frozen=True, slots=True)
class Loc:
    """Where the user wrote a node: the file, its line in the file (as tracebacks count) and column."""

    file: str
    line: int
    col: int


# ----------------------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True)
class Var:
    """A local of the function (a parameter, an assigned name, a loop target)."""

    name: str


@dataclass(frozen=True, slots=True)
class Const:
    """A literal; ``type``: its kind ("int", "float", "bool", "complex", "str", "bytes", "None", "tuple")."""

    value: object
    type: str | None = None


@dataclass(frozen=True, slots=True)
class Global:
    """A value the lane reads but does not bind: ``kind`` "global", "closure" or "builtin";
    ``name`` dotted for a module's attribute (``"np.pi"``).  Identical in every lane."""

    name: str
    kind: str
    #: the dotted name as the lane wrote it (``numpy.pi``, ``_lw0_np.pi``) when ``name`` is a
    #: module path, else None; not compared or printed (for passes that write the lane's text)
    written: str | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Prim:
    """A primitive applied to ``args``; ``keywords``: (name, expression) pairs of a call;
    ``params``: static (name, value) pairs (``attr``'s name, an in-place operator's
    ``inplace``); ``type``: the result's kind when the primitive alone fixes it;
    ``callee``: for a call, the :class:`Callee` holding the object the called name or
    attribute chain resolves to (a builtin, a module's function, a helper), else None:
    what a pass asks when the name alone does not say (autodiff's zero-derivative
    functions; read it with :func:`called`).  Not compared, hashed or printed: two calls
    of one primitive are equal IR."""

    op: str
    args: tuple
    loc: Loc
    keywords: tuple = ()
    params: tuple = ()
    type: str | None = None
    callee: "Callee | None" = field(default=None, compare=False, repr=False)


class Callee:
    """The object a call resolves to, held opaquely: a walker that follows the IR's
    dataclass fields does not enter the user's objects (a dataclass the lane calls, say).
    Held weakly where the object takes a weak reference (a function, a dispatcher): the
    lane IR's memo keeps IR, and IR must not keep the lane (which may call itself) alive.
    ``hops``: how many attribute names the call wrote after the first name (0 for
    ``helper(x)``, 1 for ``math.exp(x)``, 2 for ``np.linalg.norm(x)``; None when not given);
    ``written``: that name chain as the lane wrote it (``sqrt``, ``numpy.exp``), None when not given."""

    __slots__ = ("_get", "hops", "written")

    def __init__(self, obj, hops: int | None = None, written: str | None = None):
        self.hops, self.written = hops, written
        try:
            ref = weakref.ref(obj)
        except TypeError:  # a builtin or a ufunc: lives as long as its module anyway
            self._get = lambda: obj
        else:
            self._get = ref

    @property
    def obj(self):
        """The object called (None once a weakly held one is gone)."""
        return self._get()

    def __deepcopy__(self, memo):  # the user's object is shared, never copied (a dispatcher cannot be)
        return self


def called(prim: Prim):
    """The object the call ``prim`` calls (None if unknown, or not a call).

    Example:
        >>> called(Prim("abs", (Var("x"),), Loc("f.py", 2, 11), callee=Callee(abs))) is abs
        True
    """
    return None if prim.callee is None else prim.callee.obj


@dataclass(frozen=True, slots=True)
class Lambda:
    """A ``lambda`` written inside the lane (its body is one ``return``)."""

    function: "Function"


@dataclass(frozen=True, slots=True)
class Generator:
    """One ``for target in iter if cond...`` clause of a comprehension."""

    target: "Target"
    iter: "Expr"
    conds: tuple


@dataclass(frozen=True, slots=True)
class Comp:
    """A comprehension: ``kind`` "list", "set", "dict" or "genexp"; ``element``: one
    expression (two for a dict: key and value)."""

    kind: str
    element: tuple
    generators: tuple
    loc: Loc


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A construct the IR does not model (``with``, ``yield``...): as a statement or an
    expression, it names what and where, so a pass can refuse it with the user's line.
    ``names``: the names a ``global`` or ``nonlocal`` statement declares; ``parts``: the
    statements, expressions and ``except`` handlers written inside it, as IR (a ``with``
    statement's items and body), for passes that look for a construct anywhere the user
    wrote it."""

    what: str
    loc: Loc
    names: tuple = ()
    parts: tuple = ()


Expr = Union[Var, Const, Global, Prim, Lambda, Comp, Unsupported]


# ----------------------------------------------------------------------------- assignment targets


@dataclass(frozen=True, slots=True)
class Unpack:
    """``a, (b, *c) = ...``: ``star`` is the index of the starred item, or None."""

    items: tuple
    star: int | None = None


@dataclass(frozen=True, slots=True)
class Item:
    """``base[index]`` as an unpacking or loop target (a lone ``x[i] = v`` is a ``setitem`` :class:`Do`)."""

    base: "Expr"
    index: "Expr"


@dataclass(frozen=True, slots=True)
class Field:
    """``base.name`` as an unpacking or loop target."""

    base: "Expr"
    name: str


Target = Union[Var, Unpack, Item, Field]


# ----------------------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class Assign:
    target: Target
    value: Expr
    loc: Loc


@dataclass(frozen=True, slots=True)
class Do:
    """An expression evaluated for its effect (a call, ``setitem``, ``setattr``)."""

    expr: Expr
    loc: Loc


@dataclass(frozen=True, slots=True)
class If:
    cond: Expr
    then: tuple
    orelse: tuple
    loc: Loc


@dataclass(frozen=True, slots=True)
class Loop:
    """``kind`` "range" (``iter`` is the ``range`` primitive), "iter" (any other
    iterable) or "while" (``cond``).  ``carried``: the names live into the loop and
    assigned in it (sorted), the values one iteration hands the next; the ``for``
    target is the loop's own, not carried."""

    kind: str
    target: Target | None
    iter: Expr | None
    cond: Expr | None
    body: tuple
    orelse: tuple
    carried: tuple
    loc: Loc


@dataclass(frozen=True, slots=True)
class Exit:
    """``kind`` "break", "continue" or "return" (``value``: the returned expression or None)."""

    kind: str
    value: Expr | None
    loc: Loc


@dataclass(frozen=True, slots=True)
class Raise:
    exc: Expr | None
    cause: Expr | None
    loc: Loc


@dataclass(frozen=True, slots=True)
class Handler:
    """``except type as name:`` (``type`` None for a bare ``except:``)."""

    type: Expr | None
    name: str | None
    body: tuple
    loc: Loc


@dataclass(frozen=True, slots=True)
class Try:
    body: tuple
    handlers: tuple
    orelse: tuple
    final: tuple
    loc: Loc


@dataclass(frozen=True, slots=True)
class Assert:
    test: Expr
    msg: Expr | None
    loc: Loc


@dataclass(frozen=True, slots=True)
class Def:
    """A ``def`` nested in the function (a ``lw.scan`` step, say), bound to ``function.name``."""

    function: "Function"
    loc: Loc


Stmt = Union[Assign, Do, If, Loop, Exit, Raise, Try, Assert, Def, Unsupported]


# ----------------------------------------------------------------------------- functions


@dataclass(frozen=True, slots=True)
class Param:
    """``kind`` "positional", "vararg", "keyword" or "kwarg"; ``default`` its default or None."""

    name: str
    kind: str = "positional"
    default: Expr | None = None


@dataclass(frozen=True, slots=True)
class Function:
    """``name``: the key other functions call it by (``call:<name>``); ``source``: "source"
    when read from its text, "bytecode" when rebuilt from its code object
    (:mod:`lanewise.lane.fromcode`), whose structure is a block dispatch loop;
    ``posonly``: how many of the first "positional" parameters are positional-only
    (written before a ``/``); ``blocks``: whether its body is that block dispatch loop
    (rebuilt from bytecode, or generated by lanewise's autodiff from a function that
    was: the derivative keeps the dispatch, its locals first assigned inside the loop);
    ``origin``: a weak reference to the Python function it was
    built from (the lane and its helpers; None for a nested ``def`` or ``lambda``), whose
    globals and closure cells give a :class:`Global` its value (left out of comparisons
    and of the printed IR; weak, so that a kept IR never keeps its lane alive)."""

    name: str
    params: tuple
    body: tuple
    loc: Loc
    source: str = "source"
    posonly: int = 0
    blocks: bool = False
    origin: object = field(default=None, compare=False, repr=False)

    def python_function(self):
        """The Python function this was built from (:attr:`origin`), or None."""
        return None if self.origin is None else self.origin()


@dataclass(frozen=True, slots=True)
class LaneModule:
    """The lane (``entry``) and every Python helper it calls, directly or not, once each."""

    entry: Function
    helpers: tuple

    def functions(self) -> tuple:
        return (self.entry, *self.helpers)


def target_names(t) -> set:
    """The names an assignment target binds (``x``, or every name of ``a, (b, c)``; none
    for an item or field store).

    Example:
        >>> sorted(target_names(Unpack((Var("a"), Var("b")))))
        ['a', 'b']
    """
    if isinstance(t, Var):
        return {t.name}
    if isinstance(t, Unpack):
        return set().union(*(target_names(i) for i in t.items))
    return set()
