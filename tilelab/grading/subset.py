"""The subset of CUDA C a graded kernel is written in: one allow-list, checked before any
compiler sees the source.

A graded kernel may name only CUDA's device API (:data:`tilelab.emu.cuda_api.NAMES`, less
the in-kernel clocks), C and C++ keywords and the standard integer and float types, a few
constants of the allowed headers, and names it declares itself (its ``__device__``
functions and variables, parameters, locals, types and the macros it ``#define``\\ s), none
of them a name C and C++ reserve to the compiler (``__x``, ``_X``).
Anything else is refused with the construct named and what to write instead: so nvcc and
the emulator's g++ build see the same program (no test of a compiler's macros, no
attribute that changes how one of them builds it), no code runs at load, nothing reaches
the C library, and nothing times itself. The scan reads the source as the compiler does:
comments and literals masked by the emulator's lexer, directives with their line splices.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tilelab.emu import cuda_api
from tilelab.emu.lexer import Directive, directives, line_of, mask
from tilelab.grading.source_checks import SourceRejected


class NotInSubset(SourceRejected):
    """The source leaves the graded subset; the message names the construct and the fix."""


CLOCKS = frozenset({"clock", "clock64"})
API = cuda_api.NAMES - CLOCKS

KEYWORDS = frozenset({
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "if", "int", "long", "return", "short", "signed",
    "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile",
    "while", "bool", "true", "false", "inline", "constexpr", "nullptr", "template",
    "typename", "class", "static_cast", "reinterpret_cast", "const_cast", "alignas",
    "alignof", "static_assert", "__restrict", "unroll",
})
TYPES = frozenset({
    "size_t", "ptrdiff_t", "intptr_t", "uintptr_t", "int8_t", "int16_t", "int32_t",
    "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
})
CONSTANTS = frozenset({
    "NULL", "INFINITY", "NAN", "FLT_MAX", "FLT_MIN", "FLT_EPSILON", "DBL_MAX", "DBL_MIN",
    "DBL_EPSILON", "INT_MAX", "INT_MIN", "UINT_MAX", "LLONG_MAX", "LLONG_MIN",
})
KNOWN = API | KEYWORDS | TYPES | CONSTANTS
#: names after which a declared name follows (with pointers and qualifiers between)
_BASE_TYPES = (KEYWORDS & {"char", "double", "float", "int", "long", "short", "signed",
                           "unsigned", "void", "bool", "auto"}) | TYPES | cuda_api.TYPES
_SKIP_BEFORE_NAME = {"*", "&", "const", "volatile", "__restrict__", "__restrict",
                     "__shared__", "__device__", "__constant__", "static", "extern",
                     "constexpr", "inline", "__forceinline__", "__inline__", "__noinline__"}
_TYPE_INTRODUCERS = {"struct", "union", "enum", "class", "typename"}
MEMBERS = frozenset({"x", "y", "z", "w"})
CONDITIONALS = {"if", "ifdef", "ifndef", "elif", "elifdef", "elifndef"}

#: the one _Pragma of the subset (in a macro's body, where #pragma cannot be written)
_PRAGMA_UNROLL = re.compile(r'\b_Pragma\s*\(\s*"unroll(?:\s+\d+)?"\s*\)')
_TOKEN = re.compile(r"\.?\d(?:[eEpP][+-]|[\w.'])*|[A-Za-z_$]\w*|->|::|\[\[|\S")

#: what a compiler defines for itself: testing one gives the two compilers two programs
COMPILER_MACROS = re.compile(r"^__\w+__$|^_[A-Z]\w*$|^__has_\w+$")

HINTS = {
    "asm": "inline assembly is not part of the graded subset; write the operation in C",
    "clock": "the grader times the kernel with the GPU's own events; remove the clock reads",
    "attribute": "attributes change how one compiler builds the kernel; the graded subset "
                 "allows __restrict__, __launch_bounds__(...), __align__(n), alignas(n) and "
                 "__attribute__((aligned(n))) only",
}


@dataclass(frozen=True)
class Token:
    text: str
    pos: int


def tokens(masked: str) -> list[Token]:
    """The tokens of the masked source outside directives (those are read apart)."""
    code = list(masked)
    for d in directives(masked):
        for k in range(d.start, d.end):
            if code[k] != "\n":
                code[k] = " "
    text = "".join(code)
    return [Token(m.group(), m.start()) for m in _TOKEN.finditer(text)]


#: the digraph and trigraph spellings of # (and so of ##): %: and ??=
_OTHER_HASH = re.compile(r"%:|\?\?=")


#: functions of CUDA's device API the graded subset leaves out, and why
_COPIES = ("CUDA has it, but the graded subset leaves it out: the emulator's race and traffic "
           "analyses read each access a kernel makes, which a library copy would hide; write "
           "the copy as a loop")
_HEAP = ("CUDA has it, but the graded subset leaves it out: a kernel's memory is its "
         "buffers, its shared arrays and its local variables")
LEFT_OUT = {"memcpy": _COPIES, "memset": _COPIES, "memmove": _COPIES, "malloc": _HEAP,
            "free": _HEAP}

#: CUDA's words the grader reads where a source writes them, never through a macro
READ_AS_WRITTEN = {
    "__global__": "it finds the kernel and checks its signature by its declaration",
    "__restrict__": "the signature check reads each parameter as declared",
    "__shared__": "the emulator lays out each block's shared memory from the declarations "
                  "themselves",
    "extern": "the emulator recognises an extern __shared__ array by its declaration",
}


def _refuse(masked: str, pos: int, what: str, hint: str) -> NotInSubset:
    return NotInSubset(f"line {line_of(masked, pos)}: {what} is not allowed in a graded "
                       f"kernel: {hint}.")


def check_subset(source: str) -> None:
    """Raise :class:`NotInSubset` for the first construct outside the graded subset."""
    source = _PRAGMA_UNROLL.sub(lambda m: " " * len(m.group()), source)
    masked = _without_kernel_linkage(source, _disabled(mask(source)))
    _check_characters(masked)
    if m := _OTHER_HASH.search(masked):  # a # the directive scanner would not see
        raise _refuse(masked, m.start(), f"{m.group()} (another spelling of # or ##)",
                      "write # itself, in a directive of your own macros")
    found = list(directives(masked))
    macros = {m.group(1) for d in found if d.name in ("define", "undef")
              and (m := re.match(r"([A-Za-z_]\w*)", d.arg))}
    for d in found:
        _check_directive(masked, d, macros)
    toks = tokens(masked)
    _check_linkage(source, masked, toks)
    bodies = []  # each macro's parameters and body: code wherever the macro is expanded
    for d in found:
        if d.name == "define":
            m = re.match(r"[A-Za-z_]\w*(?:\(([^)]*)\))?(.*)", d.arg, re.S)
            assert m is not None  # _check_directive refused any other #define
            body = [Token(x.group(), d.start) for x in _TOKEN.finditer(m.group(2))]
            bodies.append((set(_names(m.group(1) or "")), body))
    end = [Token(";", 0)]
    declared = declared_names(toks + sum((end + b for _, b in bodies), end)) | macros
    _check_shapes(masked)
    for params, body in bodies:
        _check_names(masked, body, declared | params)
        _check_literals(masked, body)
    _check_names(masked, toks, declared)
    _check_literals(masked, toks)
    _check_file_scope(masked, toks)


#: ``extern "C"`` (its literal masked to a blank) written directly before ``__global__``
_KERNEL_LINKAGE = re.compile(r'\bextern\s*" "\s*(?=__global__\b)')

#: what to do with any other linkage specification
_LINKAGE_HINT = ('PyCUDA\'s SourceModule already gives every kernel C linkage (it wraps the '
                 'source in extern "C" { ... }); remove extern "C" (and the braces of an '
                 'extern "C" { ... } block), or write it only directly before __global__, '
                 'as in extern "C" __global__ void kernel(...)')


def _without_kernel_linkage(source: str, masked: str) -> str:
    """``masked`` with each ``extern "C"`` written directly before ``__global__`` blanked
    (newlines kept): the kernel has C linkage either way, as PyCUDA wraps the source in
    ``extern "C" { }``, so the scan reads the kernel as if it were not written."""
    def blank(m: re.Match[str]) -> str:
        quote = m.group().index('"')
        if source[m.start() + quote:m.start() + quote + 3] != '"C"':
            return m.group()  # another one-letter linkage ("D"): refused by the scan
        return "".join(c if c == "\n" else " " for c in m.group())
    return _KERNEL_LINKAGE.sub(blank, masked)


def _check_linkage(source: str, masked: str, toks: list[Token]) -> None:
    """No linkage specification (``extern "C"`` directly before ``__global__`` is blanked
    before the scan): one could declare a C library function (``extern "C" long write(...)``)."""
    for i, t in enumerate(toks[:-1]):
        if t.text != "extern" or toks[i + 1].text != '"':
            continue
        start = toks[i + 1].pos
        literal = source[start:masked.find('"', start + 1) + 1]
        spec = "extern " + (literal if re.fullmatch(r'"[\w+ ]{0,8}"', literal) else '"..."')
        if i + 3 < len(toks) and toks[i + 3].text == "{":
            what = f"an {spec} {{ ... }} block"
        else:
            what = f"{spec} before anything but a __global__ function"
        raise _refuse(masked, t.pos, what, _LINKAGE_HINT)


def _check_characters(masked: str) -> None:
    in_directive = [False] * len(masked)
    for d in directives(masked):
        in_directive[d.start:d.end] = [True] * (d.end - d.start)
    for i, ch in enumerate(masked):
        if ch == "\\" and not (in_directive[i] and masked[i + 1:i + 2].isspace()):
            raise _refuse(masked, i, "a backslash outside a string (a line splice or a "
                          "universal character name)", "write names in plain ASCII letters, "
                          "and join lines with a backslash only in a #define")
        if ord(ch) > 127 or ch == "$":
            raise _refuse(masked, i, f"the character {ch!r} outside a comment or string",
                          "write names in plain ASCII letters, digits and _")


def _names(text: str) -> list[str]:
    return [t for t in re.findall(r"\.?\d(?:[eEpP][+-]|[\w.'])*|[A-Za-z_$]\w*", text)
            if not t[0].isdigit() and t[0] != "."]


def _check_directive(masked: str, d: Directive, macros: set[str]) -> None:
    if d.name in ("include", "endif", "else", "error", ""):
        return  # includes: the allow-list of headers (source_checks)
    if d.name == "pragma":
        if re.fullmatch(r"unroll(?:\s*\(?\s*\w*\s*\)?)?", d.arg):
            return
        raise _refuse(masked, d.start, f"#pragma {d.arg[:40]}", "only #pragma unroll is "
                      "part of the graded subset")
    if d.name in ("define", "undef"):
        m = re.match(r"([A-Za-z_]\w*)(\([^)]*\))?(.*)", d.arg, re.S)
        if not m:
            raise _refuse(masked, d.start, f"#{d.name} {d.arg[:40]}", "define a macro by name")
        name, _params, body = m.groups()
        if COMPILER_MACROS.match(name):
            raise _refuse(masked, d.start, f"#{d.name} {name}", "a name of this form belongs "
                          "to the compiler; name your macro without leading underscores")
        if "#" in body:
            raise _refuse(masked, d.start, f"# in the body of #define {name}",
                          "macros of the graded subset do not make strings or paste tokens")
        for word in _names(body):
            if word in READ_AS_WRITTEN:
                raise _refuse(masked, d.start, f"#define {name} standing for {word}",
                              f"the grader reads {word} where it is written "
                              f"({READ_AS_WRITTEN[word]}); write {word} itself there")
        return
    if d.name in CONDITIONALS:
        for n in _names(d.arg):
            if n != "defined" and n not in macros:
                raise _refuse(masked, d.start, f"#{d.name} {d.arg[:60]}",
                              f"{n} is not a macro this source defines: a test of a "
                              "compiler's macro (__CUDA_ARCH__, __SANITIZE_THREAD__, "
                              "__GNUC__...) gives nvcc and the emulator two programs; test "
                              "only macros you #define")
        return
    raise _refuse(masked, d.start, f"#{d.name}", "the graded subset allows #include of an "
                  "allowed header, #define/#undef of your own macros, #ifdef/#ifndef/#if of "
                  "them, #error and #pragma unroll")


def declared_names(toks: list[Token]) -> set[str]:
    """Names the source declares: after a type (pointers and qualifiers between), after
    ``struct``/``enum``/``typename``..., and after a comma in a declaration statement."""
    types = set(_BASE_TYPES)
    declared: set[str] = set()
    for _ in range(3):  # typedef'd and struct types make more declarations visible
        before = len(types) + len(declared)
        for i, t in enumerate(toks):
            if not _is_name(t.text) or (t.text in KNOWN and not _may_hide(t.text)):
                continue
            prev = _previous(toks, i)
            if prev is None:
                continue
            p = toks[prev].text
            if p in _TYPE_INTRODUCERS:
                types.add(t.text)
                declared.add(t.text)
            elif p in types or (p == ">" and _template_closes(toks, prev)):
                declared.add(t.text)
                if _statement_starts_with(toks, i, "typedef"):
                    types.add(t.text)
            elif p == "," and _declaration_statement(toks, i, types):
                declared.add(t.text)
        if len(types) + len(declared) == before:
            break
    return declared


def _api_function(name: str) -> bool:
    """Whether ``name`` is a function of CUDA's device API (not a built-in variable, a
    qualifier or a type)."""
    return name in API and name not in cuda_api.BUILTIN_VARIABLES and \
        name not in cuda_api.QUALIFIERS and name not in cuda_api.TYPES


def _may_hide(name: str) -> bool:
    """Whether a variable of the source's own may take the name of a function of CUDA's
    device API, as C++ lets it (``int y0``, ``float max``): not a name that begins with
    ``_``."""
    return _api_function(name) and not name.startswith("_")


def _is_name(text: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_$]\w*", text))


def _previous(toks: list[Token], i: int) -> int | None:
    """The token a name is declared after: qualifiers, pointers and the subset's
    attributes with arguments (``__launch_bounds__(256)``) stepped over."""
    j = i - 1
    while j >= 0:
        if toks[j].text in _SKIP_BEFORE_NAME:
            j -= 1
        elif toks[j].text == ")" and (k := _opening(toks, j)) > 0 and \
                toks[k - 1].text in _ATTRIBUTES_WITH_ARGS:
            j = k - 2
        else:
            break
    return j if j >= 0 else None


_ATTRIBUTES_WITH_ARGS = {"__launch_bounds__", "__align__", "alignas"}


def _opening(toks: list[Token], j: int) -> int:
    """The index of the ``(`` matching the ``)`` at ``j`` (-1 when none)."""
    depth = 0
    for k in range(j, -1, -1):
        if toks[k].text == ")":
            depth += 1
        elif toks[k].text == "(":
            depth -= 1
            if depth == 0:
                return k
    return -1


def _template_closes(toks: list[Token], j: int) -> bool:
    """Whether the ``>`` at ``j`` closes ``template <...>`` or a cast's ``<type>``... no:
    only the template parameter list of a declaration (``template <int T> __global__``)."""
    depth = 0
    for k in range(j, max(-1, j - 64), -1):
        if toks[k].text == ">":
            depth += 1
        elif toks[k].text == "<":
            depth -= 1
            if depth == 0:
                return k > 0 and toks[k - 1].text == "template"
    return False


def _statement_start(toks: list[Token], i: int) -> int:
    depth = 0
    for k in range(i - 1, -1, -1):
        t = toks[k].text
        if t in ")]":
            depth += 1
        elif t in "([":
            if depth == 0:
                return k + 1
            depth -= 1
        elif depth == 0 and t in ";{}":
            return k + 1
    return 0


def _statement_starts_with(toks: list[Token], i: int, word: str) -> bool:
    s = _statement_start(toks, i)
    return s < len(toks) and toks[s].text == word


def _declaration_statement(toks: list[Token], i: int, types: set[str]) -> bool:
    """Whether the comma before ``toks[i]`` separates declarators of one declaration (the
    statement, at this bracket depth, starts with a type)."""
    s = _statement_start(toks, i)
    while s < i and (toks[s].text in _SKIP_BEFORE_NAME or toks[s].text in QUALIFIER_WORDS):
        s += 1
    return s < i and toks[s].text in types and (s == 0 or toks[s - 1].text != "(")


QUALIFIER_WORDS = {"typedef", "__global__", "__host__", "template"}


def _check_literals(masked: str, toks: list[Token]) -> None:
    """String literals only as printf's format."""
    for i, t in enumerate(toks):
        if t.text != '"':
            continue
        # the opening quote of a literal is the quote after `printf (`
        if i >= 2 and toks[i - 1].text == "(" and toks[i - 2].text == "printf":
            continue
        if i >= 1 and toks[i - 1].text == '"':  # the literal's closing quote, or "a" "b"
            continue
        if i >= 1 and toks[i - 1].text == "," and _callee(toks, i) == "static_assert":
            continue  # a compile-time assertion's message: nothing of it runs
        raise _refuse(masked, t.pos, "a string literal outside printf's format",
                      "strings appear only as the first argument of printf")


def _callee(toks: list[Token], i: int) -> str:
    """The name before the parenthesis that encloses token ``i`` ("" at the top)."""
    depth = 0
    for j in range(i - 1, -1, -1):
        if toks[j].text == ")":
            depth += 1
        elif toks[j].text == "(":
            if depth == 0:
                return toks[j - 1].text if j else ""
            depth -= 1
    return ""


def _disabled(masked: str) -> str:
    """``masked`` with the code of each ``#if 0`` block blanked up to its ``#else``, ``#elif``
    or ``#endif`` (neither compiler reads it: an honest kernel keeps old code there)."""
    out = list(masked)
    depth, start = 0, -1
    for d in directives(masked):
        if d.name in ("if", "ifdef", "ifndef"):
            if depth:
                depth += 1
            elif d.name == "if" and d.arg.strip() == "0":
                depth, start = 1, d.end
        elif depth and d.name == "endif":
            depth -= 1
        elif depth == 1 and d.name in ("else", "elif"):
            depth = 0
        if start >= 0 and depth == 0:
            for k in range(start, d.start):
                if out[k] != "\n":
                    out[k] = " "
            start = -1
    return "".join(out)


def _check_names(masked: str, toks: list[Token], declared: set[str]) -> None:
    for i, t in enumerate(toks):
        name = t.text
        if name == "printf" and toks[i + 1:i + 2] and toks[i + 1].text == "(" and \
                toks[i + 2:i + 3] and toks[i + 2].text != '"':
            raise _refuse(masked, t.pos, "printf with a format that is not a string literal",
                          'write the format as a literal: printf("%d\\n", x)')
        if not _is_name(name):
            if name == "[[":
                raise _refuse(masked, t.pos, "a [[...]] attribute", HINTS["attribute"])
            continue
        nxt = toks[i + 1].text if i + 1 < len(toks) else ""
        prev = toks[i - 1].text if i else ""
        if name in ("asm", "__asm__", "__asm"):
            raise _refuse(masked, t.pos, name, HINTS["asm"])
        if name in CLOCKS or name == "globaltimer":
            raise _refuse(masked, t.pos, f"{name}()", HINTS["clock"])
        if name == "__attribute__":
            _check_attribute(masked, toks, i)
            continue
        if prev in (".", "->"):
            if name in MEMBERS or name in declared:
                continue
            raise _refuse(masked, t.pos, f"the member {name}", "only members of your own "
                          "structs and the x, y, z, w of CUDA's vector types")
        if name in ("aligned",) and _inside_attribute(toks, i):
            continue
        if _api_function(name) and nxt != "(" and \
                name not in declared:  # a variable of the source's own may hide one (y0)
            raise _refuse(masked, t.pos, f"{name} without a call",
                          f"call {name}(...); its address is not part of the graded subset")
        if name in KNOWN:
            continue
        if name.startswith("__") or COMPILER_MACROS.match(name):  # declared here or not
            raise _refuse(masked, t.pos, name, "C and C++ reserve a name that begins with "
                          "__, or with _ and a capital letter, to the compiler and its "
                          "libraries, and one the kernel declares could stand for one of "
                          "theirs (a runtime helper, a mangled name); rename it (the graded "
                          "subset is CUDA's device API, C's types and your own names)")
        if name in declared:
            continue
        if name in LEFT_OUT:
            raise _refuse(masked, t.pos, name, LEFT_OUT[name])
        raise _refuse(masked, t.pos, name, "it is neither CUDA's device API nor a name this "
                      "source declares; declare it in the kernel cell (the graded subset "
                      "reaches no other library)")


def _inside_attribute(toks: list[Token], i: int) -> bool:
    return i >= 3 and toks[i - 1].text == "(" and toks[i - 2].text == "(" and \
        toks[i - 3].text == "__attribute__"


def _check_attribute(masked: str, toks: list[Token], i: int) -> None:
    text = " ".join(t.text for t in toks[i + 1:i + 8])
    if not re.match(r"\( \( aligned \( \S+ \) \) \)", text):
        what = toks[i + 3].text if i + 3 < len(toks) else ""
        raise _refuse(masked, toks[i].pos, f"__attribute__(({what}...))", HINTS["attribute"])


_SHAPES = (
    (re.compile(r"\(\s*[*&]+\s*(?:[A-Za-z_]\w*\s*)?\)\s*\("), "a function pointer",
     "call your own __device__ functions by name"),
    (re.compile(r"\(\s*\{"), "a statement expression ({{ ... }})", "write a __device__ function"),
    (re.compile(r"\b(?:typedef|using)\b[^;{}]*\("), "a typedef of a function type",
     "typedefs of the graded subset name data types"),
    (re.compile(r"\b(?:decltype|typeof|__typeof__|__typeof|__auto_type)\b"), "{m}",
     "name the type"),
    (re.compile(r"\b(?:operator|goto|namespace|throw|try|catch|new|delete|virtual|friend|"
                r"register|thread_local|_Thread_local|_Pragma|__declspec)\b"), "{m}",
     "the graded subset is C with CUDA's extensions and templates"),
)


def _check_shapes(masked: str) -> None:
    for pattern, what, hint in _SHAPES:
        m = pattern.search(masked)
        if m:
            raise _refuse(masked, m.start(), what.format(m=m.group().strip()), hint)


def _check_file_scope(masked: str, toks: list[Token]) -> None:
    """No code that runs at load: at file scope, no initializer that calls anything, and no
    object of the source's own struct type (its constructor would run at load)."""
    own_types = _own_types(toks)
    stack: list[bool] = []  # for each open brace: does it open a function body?
    start = 0
    for i, t in enumerate(toks):
        if t.text == "{":
            stack.append(stack[0] if stack else _is_function_body(toks, start, i))
        elif t.text == "}" and stack:
            body = stack.pop()
            if not stack and body:
                start = i + 1
        elif t.text == ";" and not stack:
            _check_file_statement(masked, toks[start:i], own_types)
            start = i + 1


#: Words of a typedef or alias declaration that name no new type.
_TYPE_WORDS = frozenset((
    "typedef", "using", "template", "typename", "struct", "class", "union", "enum", "const",
    "volatile", "unsigned", "signed", "int", "long", "short", "char", "float", "double", "void",
    "bool", "auto", "__device__", "__host__"))


def _own_types(toks: list[Token]) -> set[str]:
    """The source's own struct, class and union types, and every name that aliases one
    (``typedef``, ``using``: an object of an alias runs the constructor as well)."""
    own = {toks[i + 1].text for i, t in enumerate(toks[:-1])
           if t.text in ("struct", "class", "union") and _is_name(toks[i + 1].text)}
    aliases = []
    for i, t in enumerate(toks):
        if t.text in ("typedef", "using"):
            end = next((j for j in range(i, len(toks)) if toks[j].text == ";"), len(toks))
            aliases.append([u.text for u in toks[i + 1:end] if _is_name(u.text)])
    grown = True
    while grown:  # an alias of an alias too
        grown = False
        for names in aliases:
            if own & set(names) and not set(names) - _TYPE_WORDS <= own:
                own |= set(names) - _TYPE_WORDS
                grown = True
    return own


def _is_function_body(toks: list[Token], start: int, brace: int) -> bool:
    """Whether the ``{`` at ``brace`` opens a function body, or a struct or an initializer."""
    if brace > 0 and toks[brace - 1].text == "=":
        return False
    stmt = [t.text for t in toks[start:brace]]
    return ")" in stmt and not ({"struct", "class", "union", "enum"} & set(stmt))


def _check_file_statement(masked: str, stmt: list[Token], own_types: set[str]) -> None:
    texts = [t.text for t in stmt]
    if not texts or texts[0] in ("typedef", "template") or (
            texts[0] in ("struct", "class", "union", "enum") and texts[-1] == "}"):
        return  # a type's definition (its constructor runs only for an object of it)
    depth, after_eq = 0, False
    for k, t in enumerate(stmt):
        if t.text in "([{":
            depth += 1
        elif t.text in ")]}":
            depth -= 1
        elif t.text == "=" and depth == 0:
            after_eq = True
        if t.text == "(" and k > 0 and (after_eq or depth > 1) and (
                _is_name(texts[k - 1]) or texts[k - 1] in (")", "]")):
            raise _refuse(masked, t.pos, "a file-scope initializer that calls a function",
                          "it would run when the module loads; initialize inside the kernel")
        if t.text == "[" and after_eq and k > 0 and texts[k - 1] in ("=", ",", "("):
            raise _refuse(masked, t.pos, "a lambda in a file-scope initializer",
                          "it would run when the module loads; initialize inside the kernel")
    if own_types & set(texts):
        raise _refuse(masked, stmt[0].pos, "a file-scope object of a struct type",
                      "its constructor would run when the module loads; declare it inside "
                      "the kernel or as a __shared__ array")
