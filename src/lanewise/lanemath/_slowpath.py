"""Rare slow paths that do not stop LLVM from vectorising the loop around them.

A branch such as ``if abs(x) > 2**28: r = payne_hanek_cos(x)`` inside a loop body
normally defeats the loop vectoriser: the call has no vector form, so LLVM keeps the
whole loop scalar.  :func:`vector_callable` turns a scalar Numba function into an
intrinsic whose call site carries LLVM's ``vector-function-abi-variant`` attribute,
naming *masked* vector versions of the function for 2, 4, ..., 64 lanes.  When the
vectoriser predicates the branch it calls the masked variant with the lane mask; the
variant tests the mask first (one ``kortest``) and only when some lane needs it calls
the scalar slow function for the active lanes.  So the common path is fully
vectorised, and the slow path costs one test-and-branch per vector when no lane
takes it — the same structure SLEEF uses, produced by the compiler.

The scalar slow function is compiled only when some lane first needs it.  The
caller's module calls it through a pointer, the external data symbol
``lanewise_lanemath_<name>_ptr``.  :func:`register_symbols` gives that symbol an
address at ``import lanewise``, before any kernel is loaded, so object code from
Numba's disk cache links by name as before.  The pointer starts at a ctypes
trampoline, which compiles the function as a ``cfunc`` (with lanewise's disk
cache), points the pointer at it and computes the value.  So a lane that never
sees an argument beyond 2**30 never compiles Payne-Hanek reduction.  Compiling
it took 1-1.3 s of the first call of every new trig lane on a fresh cache.

The variants are listed in ``llvm.compiler.used`` so no optimisation pass
deletes them before the vectoriser looks for them.

The vectoriser runs after LLVM's inliner, so the calls it makes to a variant stay
calls: every vector iteration paid a call, and the caller spilled its live vector
registers around it.  A module re-optimised after linking (a kernel that another
kernel links in) had them inlined by the second round and ran 2x faster than
the same kernel compiled once (W5: 0.55 s loaded from the disk cache, 1.1 s in
the process that compiled it).  So the variants are ``alwaysinline`` and
:func:`inline_variants` runs LLVM's always-inliner once more on a library whose
final module defines them, right after Numba's optimisation.
"""

from __future__ import annotations

from llvmlite import binding as llvm
from llvmlite import ir
from llvmlite.ir.values import AttributeSet
from numba import types
from numba.core import codegen as _numba_codegen
from numba.extending import intrinsic

from ..runtime.hooks import hook_method
from ..runtime.slow_symbols import SLOW_FUNCTIONS, pointer_symbol, register_symbols


#: Vector widths the variants are generated for (float64 lanes: 8 per AVX-512 register;
#: float32 loops computing in float64 may use 16 or 32).
VECTOR_WIDTHS = (2, 4, 8, 16, 32)

class _RawAttributes(AttributeSet):
    """An llvmlite attribute set that accepts any attribute text verbatim."""

    _known = ()

    def add(self, name):
        return set.add(self, name)


def _keep(module: ir.Module, functions) -> None:
    """Append ``functions`` to the module's ``llvm.compiler.used`` array."""
    ptr = ir.PointerType(ir.IntType(8))
    gv = module.globals.get("llvm.compiler.used")
    items = list(gv.initializer.constant) if gv is not None else []
    items += [f.bitcast(ptr) for f in functions]
    arr = ir.ArrayType(ptr, len(items))
    if gv is None:
        gv = ir.GlobalVariable(module, arr, "llvm.compiler.used")
        gv.linkage = "appending"
        gv.section = "llvm.metadata"
    gv.value_type = arr
    gv.initializer = ir.Constant(arr, items)


def _define_variant(module, scalar_fn, vf, ftype):
    """``<vf x T> f_v{vf}m(<vf x T> x, <vf x i1> mask)``: if no mask bit is set, return at
    once; otherwise run a small loop calling the scalar function for the set lanes."""
    vty = ir.VectorType(ftype, vf)
    mty = ir.VectorType(ir.IntType(1), vf)
    i32 = ir.IntType(32)
    bits_t = ir.IntType(vf)
    fn = ir.Function(module, ir.FunctionType(vty, [vty, mty]), f"{scalar_fn.name}_v{vf}m")
    fn.linkage = "linkonce_odr"
    fn.attributes = _RawAttributes(["nounwind", "willreturn", "memory(none)", "alwaysinline"])
    x, mask = fn.args
    entry = fn.append_basic_block("entry")
    work = fn.append_basic_block("work")
    head = fn.append_basic_block("head")
    call = fn.append_basic_block("call")
    nxt = fn.append_basic_block("next")
    done = fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    bits = b.bitcast(mask, bits_t)
    br = b.cbranch(b.icmp_unsigned("!=", bits, ir.Constant(bits_t, 0)), work, done)
    br.set_weights([1, 1000])          # the slow path is rare
    b.position_at_end(work)
    b.branch(head)
    # head: i, acc
    b.position_at_end(head)
    i = b.phi(i32)
    acc = b.phi(vty)
    bit = b.trunc(b.lshr(bits, b.zext(i, bits_t) if vf > 32 else b.trunc(i, bits_t) if vf < 32 else i),
                  ir.IntType(1))
    b.cbranch(bit, call, nxt)
    b.position_at_end(call)
    res = b.call(scalar_fn, [b.extract_element(x, i)])
    acc2 = b.insert_element(acc, res, i)
    b.branch(nxt)
    b.position_at_end(nxt)
    acc3 = b.phi(vty)
    acc3.add_incoming(acc, head)
    acc3.add_incoming(acc2, call)
    i2 = b.add(i, ir.Constant(i32, 1))
    b.cbranch(b.icmp_unsigned("<", i2, ir.Constant(i32, vf)), head, done)
    i.add_incoming(ir.Constant(i32, 0), work)
    i.add_incoming(i2, nxt)
    acc.add_incoming(ir.Constant(vty, None), work)
    acc.add_incoming(acc3, nxt)
    b.position_at_end(done)
    out = b.phi(vty)
    out.add_incoming(ir.Constant(vty, None), entry)
    out.add_incoming(acc3, nxt)
    b.ret(out)
    return fn


#: The prefix of every variant's name (``<prefix><function>_v<width>m``).
VARIANT_PREFIX = "lanewise_lanemath_"


def _defines_variants(module) -> bool:
    """Whether an LLVM module (llvmlite binding) defines a slow-path vector variant."""
    return any(f.name.startswith(VARIANT_PREFIX) and f.name.endswith("m") and not f.is_declaration
               and f.name[:-1].rpartition("_v")[2].isdigit() for f in module.functions)


def inline_variants(library) -> None:
    """Inline the vectoriser's calls to the variants in ``library``'s final module
    (the module docstring says why); a no-op for a module without variants."""
    module = library._final_module
    if not _defines_variants(module):
        return
    builder = llvm.create_pass_builder(library._codegen._tm, llvm.create_pipeline_tuning_options(speed_level=0))
    passes = llvm.create_new_module_pass_manager()
    passes.add_always_inliner_pass()
    passes.add_simplify_cfg_pass()
    passes.run(module, builder)


def _install() -> None:
    """Run :func:`inline_variants` after Numba optimises every CPU library's final module."""
    hook_method(_numba_codegen.CPUCodeLibrary, "_optimize_final_module", inline_variants, after=True)


_install()


def vector_callable(name: str):
    """An intrinsic ``f(x)`` calling slow function ``name`` (:data:`SLOW_FUNCTIONS`)
    out of line, through its pointer (module docstring).

    The function maps one float64 to one float64 and must be pure (no exceptions, no
    memory effects).  The call is marked so the loop vectoriser can widen it to the
    masked variants described in the module docstring.
    """
    if name not in SLOW_FUNCTIONS:
        raise ValueError(f"no slow function {name!r} (see SLOW_FUNCTIONS)")
    nbtype = types.float64  # what the cfunc behind the pointer takes and returns
    symbol = f"{VARIANT_PREFIX}{name}"
    sig = nbtype(nbtype)
    register_symbols()

    def ensure(context, builder):
        module = builder.module
        fn = module.globals.get(symbol)
        if fn is not None:
            return fn
        ftype = context.get_value_type(nbtype)
        fnty = ir.FunctionType(ftype, [ftype])
        pointer = ir.GlobalVariable(module, fnty.as_pointer(), pointer_symbol(name))
        pointer.linkage = "external"
        fn = ir.Function(module, fnty, symbol)
        fn.linkage = "linkonce_odr"
        # Not memory(none) itself: it reads the pointer (the calls to it are marked,
        # which is true of what they compute, whichever function the pointer holds).
        fn.attributes = _RawAttributes(["noinline", "nounwind", "willreturn"])
        b = ir.IRBuilder(fn.append_basic_block())
        b.ret(b.call(b.load(pointer), [fn.args[0]]))
        _keep(module, [_define_variant(module, fn, vf, ftype) for vf in VECTOR_WIDTHS])
        return fn

    variants = ",".join(f"_ZGV_LLVM_M{vf}v_{symbol}({symbol}_v{vf}m)" for vf in VECTOR_WIDTHS)

    @intrinsic
    def call(typingctx, x):
        if x != nbtype:
            return None

        def codegen(context, builder, signature, args):
            fn = ensure(context, builder)
            inst = builder.call(fn, [args[0]])
            inst.attributes = _RawAttributes(
                [f'"vector-function-abi-variant"="{variants}"', "nounwind", "memory(none)"])
            return inst

        return sig, codegen

    call.__name__ = f"slow_{name}"
    return call
