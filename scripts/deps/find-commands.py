#!/usr/bin/env python3
"""Lists every external command the test suites and pfx-image run, with where each is used.

Used by scripts/tests.d/05-fresh-root.sh to check that scripts/install-deps, on a fresh
Debian, provides everything the suites need. The list is found from the sources, not kept
by hand, so a new command in a suite cannot go missing from scripts/deps/ unnoticed:

  - shell (scripts/test-all, scripts/tests.d/*.sh, and shell scripts they run): the word
    in command position of each simple command, after wrappers such as `ip netns exec NS`,
    `timeout N` and the script's own functions that run "$@"; `bash -c '...'` strings and
    `python3 -` heredocs are scanned too;
  - Python (testbed and test helpers the suites run): list literals passed to a call,
    `["ip", "netns", ...]`, the argv form of subprocess;
  - Rust: `Command::new("...")` literals in image/src and the player's and fleet's
    sources and tests;
  - pfx-image's own declared host tools (`pfx-image tools --json`, given with --tools-json).

Builtins and keywords come from bash itself (`compgen -b -k`); the scripts' functions,
variables and paths into the checkout are not commands of the host.

  find-commands.py [--top DIR] [--tools-json FILE] [--json]
"""

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

# Words that run the rest of their arguments as a command: how many of the following words
# (options and their values included) to skip before the command. A callable decides from
# the words.
def _skip_opts(words, i, with_value=()):
    """Index of the first word after options (and the values of options in with_value)."""
    while i < len(words) and words[i].startswith("-"):
        if words[i] == "--":
            return i + 1
        i += 2 if words[i] in with_value else 1
    return i


WRAPPERS = {
    "exec": lambda w, i: _skip_opts(w, i, ("-a",)),
    "command": lambda w, i: _skip_opts(w, i),
    "env": lambda w, i: _skip_env(w, i),
    "nice": lambda w, i: _skip_opts(w, i, ("-n",)),
    "nohup": lambda w, i: i,
    "setsid": lambda w, i: _skip_opts(w, i),
    "stdbuf": lambda w, i: _skip_opts(w, i),
    "sudo": lambda w, i: _skip_opts(w, i, ("-u", "-g")),
    "time": lambda w, i: _skip_opts(w, i, ("-f", "-o")),
    "timeout": lambda w, i: _skip_opts(w, i, ("-s", "-k")) + 1,
    "chroot": lambda w, i: _skip_opts(w, i) + 1,
    "nsenter": lambda w, i: _skip_opts(w, i, ("-t", "-n", "-m")),
    "unshare": lambda w, i: _skip_opts(
        w,
        i,
        ("--propagation", "-S", "--setuid", "-G", "--setgid", "-R", "--root", "-w", "--wd", "--monotonic", "--boottime"),
    ),
    # ip netns exec NS CMD ...
    "ip": lambda w, i: i + 3 if w[i : i + 2] == ["netns", "exec"] else None,
}


def _skip_env(words, i):
    i = _skip_opts(words, i, ("-u",))
    while i < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i]):
        i += 1
    return i


def bash_reserved():
    out = subprocess.run(["bash", "-c", "compgen -b; compgen -k"], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


COMMAND_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.+-]*$")


# ------------------------------------------------------------------------------ shell
class Shell:
    """A small lexer for the bash the suites use: enough to find command positions."""

    SEPARATORS = {";", ";;", "&", "&&", "||", "|", "|&", "\n", "(", ")", "{", "}", "!", "$(", "`", "((", "))"}
    # Keywords after which a new command starts.
    STARTERS = {"then", "do", "else", "elif", "if", "while", "until", "time"}

    def __init__(self, text):
        self.text = text

    def tokens(self):
        """Yields (kind, value, line): kind is 'word', 'sep', or 'sub' for $(...) and
        `...` bodies (yielded as their own text, to be scanned recursively)."""
        s, n, i, line = self.text, len(self.text), 0, 1
        heredocs = []
        word, word_quoted, word_line = [], False, 1

        def flush():
            nonlocal word, word_quoted
            if word:
                tok = ("word", "".join(word), word_line, word_quoted)
                word, word_quoted = [], False
                return tok
            return None

        while i < n:
            c = s[i]
            if c == "\n":
                t = flush()
                if t:
                    yield t
                yield ("sep", "\n", line, False)
                line += 1
                i += 1
                # Heredoc bodies start after the line that opened them.
                for tag, strip in heredocs:
                    body = []
                    while i < n:
                        j = s.find("\n", i)
                        j = n if j < 0 else j
                        ln = s[i:j]
                        i = j + 1
                        line += 1
                        if (ln.lstrip("\t") if strip else ln) == tag:
                            break
                        body.append(ln)
                    yield ("heredoc", "\n".join(body), line, False)
                heredocs = []
                continue
            if c in " \t":
                t = flush()
                if t:
                    yield t
                i += 1
                continue
            if c == "\\" and i + 1 < n:
                if s[i + 1] == "\n":
                    line += 1
                else:
                    word.append(s[i + 1])
                i += 2
                continue
            if c == "#" and not word:
                j = s.find("\n", i)
                i = n if j < 0 else j
                continue
            if c == "'":
                j = s.find("'", i + 1)
                j = n if j < 0 else j
                if not word:
                    word_line = line
                word.append(s[i + 1 : j])
                word_quoted = True
                line += s.count("\n", i, j)
                i = j + 1
                continue
            if c == '"':
                # Double quotes: the text, and any $(...) inside is a command of its own.
                j = i + 1
                buf = []
                while j < n and s[j] != '"':
                    if s[j] == "\\" and j + 1 < n:
                        buf.append(s[j : j + 2])
                        j += 2
                        continue
                    if s.startswith("$(", j) and not s.startswith("$((", j):
                        k = self._match(s, j + 2, "(", ")")
                        yield ("sub", s[j + 2 : k], line, False)
                        buf.append("$(...)")
                        j = k + 1
                        continue
                    buf.append(s[j])
                    j += 1
                if not word:
                    word_line = line
                word.append("".join(buf))
                word_quoted = True
                line += s.count("\n", i, j)
                i = j + 1
                continue
            if s.startswith("((", i) and not word:
                # An arithmetic command, `(( ... ))` or `for (( ... ))`: no commands inside.
                k = self._match(s, i + 2, "(", ")")
                i = k + 2
                continue
            if s.startswith("$((", i):
                k = self._match(s, i + 3, "(", ")")
                # Arithmetic: no commands, except command substitutions inside.
                for m in re.finditer(r"\$\(([^()]*)\)", s[i + 3 : k]):
                    yield ("sub", m.group(1), line, False)
                if not word:
                    word_line = line
                word.append("$((...))")
                i = k + 2
                continue
            if s.startswith("$(", i) or c == "`":
                if c == "`":
                    k = s.find("`", i + 1)
                    k = n if k < 0 else k
                    body, i2 = s[i + 1 : k], k + 1
                else:
                    k = self._match(s, i + 2, "(", ")")
                    body, i2 = s[i + 2 : k], k + 1
                yield ("sub", body, line, False)
                if not word:
                    word_line = line
                word.append("$(...)")
                line += body.count("\n")
                i = i2
                continue
            if c == "$" and i + 1 < n and s[i + 1] == "{":
                k = self._match(s, i + 2, "{", "}")
                word.append(s[i : k + 1])
                i = k + 1
                continue
            if s.startswith("<<", i) and not s.startswith("<<<", i):
                t = flush()
                if t:
                    yield t
                m = re.match(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2", s[i:])
                if m:
                    heredocs.append((m.group(3), m.group(1) == "-"))
                    yield ("word", "<<", line, False)
                    i += m.end()
                    continue
            for op in (";;", "&&", "||", "|&", "((", "))", ";", "&", "|", "(", ")", "{", "}", "!"):
                if s.startswith(op, i) and not word:
                    # `{` `}` `!` are only operators as words of their own.
                    if op in ("{", "}", "!") and i + 1 < n and s[i + 1] not in " \t\n;":
                        continue
                    yield ("sep", op, line, False)
                    i += len(op)
                    break
                if s.startswith(op, i) and op in (";;", "&&", "||", "|&", ";", "&", "|", ")", "("):
                    t = flush()
                    if t:
                        yield t
                    yield ("sep", op, line, False)
                    i += len(op)
                    break
            else:
                if not word:
                    word_line = line
                word.append(c)
                i += 1
        t = flush()
        if t:
            yield t

    @staticmethod
    def _match(s, i, open_, close):
        depth = 1
        while i < len(s):
            if s[i] == "\\":
                i += 2
                continue
            if s[i] == "'" and open_ == "(":
                j = s.find("'", i + 1)
                i = len(s) if j < 0 else j + 1
                continue
            if s[i] == open_:
                depth += 1
            elif s[i] == close:
                depth -= 1
                if depth == 0:
                    return i
            i += 1
        return len(s)

    def simple_commands(self):
        """Yields (words, line, quoted flags, extra) per simple command; extra is a list of
        ('sub'|'heredoc', text) met inside it."""
        words, quoted, line, extra = [], [], 0, []
        in_case_pattern = False
        in_array = False  # inside `name=(...)`: the words are values, not a command
        after_case = 0  # 1: saw `case`, 2: saw its word, waiting for `in`
        toks = list(self.tokens())
        for kind, val, ln, q in toks:
            if kind in ("sub", "heredoc"):
                extra.append((kind, val, ln, words[:]))
                continue
            if in_array:
                in_array = not (kind == "sep" and val == ")")
                continue
            if kind == "sep" and val == "(" and words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=$", words[-1]):
                in_array = True
                continue
            if kind == "sep":
                if val == ";;":
                    in_case_pattern = True
                elif val == ")" and in_case_pattern:
                    # The pattern's `)`: the branch's commands follow.
                    in_case_pattern = False
                    continue
                if words:
                    yield words, line, quoted, extra
                words, quoted, extra = [], [], []
                continue
            if not words:
                line = ln
            if in_case_pattern:
                # A case pattern runs up to its `)`, which the lexer made a separator.
                if val == "esac":
                    in_case_pattern = False
                continue
            if after_case == 1:
                after_case = 2
                continue
            if after_case == 2 and val == "in":
                after_case = 0
                in_case_pattern = True
                continue
            if not words and val == "case":
                after_case = 1
                continue
            if not words and val in self.STARTERS and not q:
                continue
            words.append(val)
            quoted.append(q)
        if words or extra:
            yield words, line, quoted, extra


def scan_shell(path, text, reserved, found, wrappers_of=None, line0=0):
    """Adds (command -> [where]) to found; returns the script's functions (name -> how many
    leading arguments to skip before the command they run, or None if they run none)."""
    sh = Shell(text)
    cmds = list(sh.simple_commands())
    # Functions defined here: `name() {` or `function name`.
    funcs = {}
    for m in re.finditer(r"^\s*(?:function\s+)?([A-Za-z_][A-Za-z0-9_-]*)\s*\(\)\s*\{?(.*)$", text, re.M):
        funcs[m.group(1)] = None
    # A function that runs "$@" (after `shift`s) is a wrapper: its callers' arguments, past
    # the shifted ones, are a command.
    for m in re.finditer(r"^\s*([A-Za-z_][A-Za-z0-9_-]*)\s*\(\)\s*\{(.*)\}\s*;?\s*$", text, re.M):
        body = m.group(2)
        shifts = len(re.findall(r"(?:^|[;\s])shift(?:\s*;|\s*$)", body))
        for ws, _, _, _ in Shell(body).simple_commands():
            k = _command_index(ws, reserved, {})
            if k is not None and k < len(ws) and ws[k] in ('$@', '"$@"'):
                funcs[m.group(1)] = shifts
    # Functions of the shell libraries it sources (`. "$top/scripts/lib/NAME.sh"`); the
    # libraries themselves are scanned too (main adds scripts/lib/*.sh).
    for m in re.finditer(r"^\s*(?:\.|source)\s+[\"']?\$\{?(?:top|PFX_TOP)\}?/(scripts/lib/[A-Za-z0-9_.-]+\.sh)", text, re.M):
        lib = Path(__file__).resolve().parent.parent.parent / m.group(1)
        if lib.is_file():
            for f in re.finditer(r"^\s*(?:function\s+)?([A-Za-z_][A-Za-z0-9_-]*)\s*\(\)", lib.read_text(), re.M):
                funcs.setdefault(f.group(1), None)
    # A library is sourced beside the others (player-bin.sh after check.sh): the functions of
    # every scripts/lib/*.sh are words of each of them.
    if path.startswith("scripts/lib/"):
        for lib in sorted((Path(__file__).resolve().parent.parent / "lib").glob("*.sh")):
            for f in re.finditer(r"^\s*(?:function\s+)?([A-Za-z_][A-Za-z0-9_-]*)\s*\(\)", lib.read_text(), re.M):
                funcs.setdefault(f.group(1), None)
    if wrappers_of:
        funcs.update({k: v for k, v in wrappers_of.items() if k not in funcs})
    for words, line, quoted, extra in cmds:
        for kind, body, ln, before in extra:
            if kind == "sub":
                scan_shell(path, body, reserved, found, funcs, line0 + ln - 1)
            elif kind == "heredoc" and _runs_python(before):
                scan_python(path, body, found, line0 + ln - body.count("\n") - 2)
        wrappers = []
        k = _command_index(words, reserved, funcs, 0, wrappers)
        while k is not None and k < len(words):
            name = words[k]
            if name in funcs:
                skip = funcs[name]
                if skip is None:
                    break
                k = _command_index(words, reserved, funcs, k + 1 + skip, wrappers)
                continue
            for w in wrappers:
                if _is_external(w, reserved):
                    found.setdefault(w, []).append(f"{path}:{line0 + line}")
            if _is_external(name, reserved):
                found.setdefault(name, []).append(f"{path}:{line0 + line}")
            # bash -c '...', python3 -c '...'
            rest = words[k + 1 :]
            if name in ("bash", "sh") and "-c" in rest:
                j = rest.index("-c")
                if j + 1 < len(rest):
                    scan_shell(path, rest[j + 1], reserved, found, funcs, line0 + line - 1)
            if name.startswith("python3") and "-c" in rest:
                j = rest.index("-c")
                if j + 1 < len(rest):
                    scan_python(path, rest[j + 1], found, line0 + line - 1)
            break
    # `for t in a b c; do command -v "$t"`: a script's own list of the tools it needs.
    for m in re.finditer(r"\bfor\s+(\w+)\s+in\s+([^;\n]*);\s*do\s+command\s+-v\s+\"?\$\{?\1\b", text):
        ln = line0 + text.count("\n", 0, m.start()) + 1
        for w in m.group(2).split():
            if _is_external(w, reserved):
                found.setdefault(w, []).append(f"{path}:{ln}")
    return funcs


def _runs_python(words):
    k = next((i for i, w in enumerate(words) if os.path.basename(w).startswith("python3")), None)
    return k is not None and "-" in words[k + 1 :]


def _command_index(words, reserved, funcs, i=0, record=None):
    """Index of the command word: past assignments, redirections and wrappers (whose
    names go to record, when given: they are commands too)."""
    while i < len(words):
        w = words[i]
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=", w):
            i += 1
            continue
        if re.match(r"^[0-9]*[<>]", w) or w in ("<<", "<<<"):
            # A redirection: `>file` or `> file`.
            i += 1 if re.match(r"^[0-9]*[<>]+&?[^<>&]+$", w) else 2
            continue
        if w in ("local", "declare", "export", "readonly", "typeset"):
            return None
        if w in WRAPPERS:
            j = WRAPPERS[w](words, i + 1)
            if j is not None:
                if record is not None:
                    record.append(w)
                return _command_index(words, reserved, funcs, j, record)
        return i
    return None


def _is_external(name, reserved):
    """A command name, or an absolute path written out (`/usr/sbin/sshd`)."""
    if re.match(r"^/[A-Za-z0-9_./+-]+$", name):
        return not name.startswith(("/tmp/", "/proc/", "/sys/", "/dev/"))
    return name not in reserved and bool(COMMAND_NAME.match(name))


# ------------------------------------------------------------------------------ python
# The subprocess calls, and the testbed's own wrapper `run(argv)` (same name as
# subprocess.run): their first argument is an argv.
PY_RUNNERS = {"run", "Popen", "call", "check_call", "check_output"}


def scan_python(path, text, found, line0=0):
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        f = node.func
        fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if fname not in PY_RUNNERS:
            continue
        a = node.args[0]
        if isinstance(a, ast.BinOp) and isinstance(a.op, ast.Add):
            a = a.left
        if not isinstance(a, (ast.List, ast.Tuple)) or not a.elts:
            continue
        elts = a.elts
        first = elts[0]
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            continue
        argv = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else "$x" for e in elts]
        wrappers = []
        k = _command_index(argv, set(), {}, 0, wrappers)
        if k is None or k >= len(argv):
            continue
        name = argv[k]
        for w in wrappers:
            found.setdefault(w, []).append(f"{path}:{line0 + node.lineno}")
        if _is_external(name, set()):
            found.setdefault(name, []).append(f"{path}:{line0 + node.lineno}")


# ------------------------------------------------------------------------------ rust
RUST_COMMAND = re.compile(r'Command::new\(\s*"([^"]+)"\s*\)')


def scan_rust(path, text, found):
    for m in RUST_COMMAND.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        found.setdefault(m.group(1), []).append(f"{path}:{line}")


# ------------------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--top", default=str(Path(__file__).resolve().parents[2]))
    ap.add_argument("--tools-json", help="output of `pfx-image tools --json`")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    top = Path(a.top)
    reserved = bash_reserved()
    found = {}

    def rel(p):
        return str(Path(p).relative_to(top))

    shell = [top / "scripts/test-all"] + sorted((top / "scripts/tests.d").glob("*.sh")) + sorted((top / "scripts/lib").glob("*.sh"))
    python = []
    seen = set()
    while shell:
        p = shell.pop(0)
        if p in seen or not p.is_file():
            continue
        seen.add(p)
        text = p.read_text()
        scan_shell(rel(p), text, reserved, found)
        # Directories of the checkout the script names: `tb="$top/testbed"`.
        dirs = {"top": top, "PFX_TOP": top}
        for m in re.finditer(r"^\s*(\w+)=[\"']?\$\{?(?:top|PFX_TOP)\}?/([A-Za-z0-9_./-]+)", text, re.M):
            dirs[m.group(1)] = top / m.group(2)
        names = "|".join(map(re.escape, dirs))
        # Scripts of the checkout that this one runs ("$top/testbed/bench.py", "$tb/testbed"),
        # and the trees it hands to pytest.
        for m in re.finditer(r"(pytest\b[^\n]*?)?\$\{?(%s)\}?/([A-Za-z0-9_./-]*)" % names, text):
            q = dirs[m.group(2)] / m.group(3)
            if m.group(1) and q.is_dir():
                python += sorted(q.rglob("*.py"))
                continue
            if q.is_dir() or not q.is_file() or "target" in q.relative_to(top).parts[:1]:
                continue
            head = q.read_text(errors="replace")[:200]
            if "\0" in head or not (q.suffix in (".sh", ".py") or head.startswith("#!")):
                continue
            (python if q.suffix == ".py" or "python" in head.split("\n")[0] else shell).append(q)
    # Python modules those import from beside them (bench.py imports netns.py).
    todo, done = list(python), set()
    while todo:
        p = todo.pop()
        if p in done:
            continue
        done.add(p)
        text = p.read_text()
        scan_python(rel(p), text, found)
        for m in re.finditer(r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w., ]+))", text, re.M):
            for mod in (m.group(1) or m.group(2)).replace(" ", "").split(","):
                for d in (p.parent, p.parent.parent):
                    q = d / (mod.replace(".", "/") + ".py")
                    if q.is_file():
                        todo.append(q)
    for d in ["image/src", "player/src", "player/tests", "fleet/src", "fleet/tests"]:
        for p in sorted((top / d).rglob("*.rs")):
            scan_rust(rel(p), p.read_text(), found)
    if a.tools_json:
        for t in json.loads(Path(a.tools_json).read_text()):
            where = f"pfx-image tools ({t['target']}: {t['package']})"
            found.setdefault(t["command"], []).append(where)

    if a.json:
        json.dump({k: sorted(set(v)) for k, v in sorted(found.items())}, sys.stdout, indent=1)
        print()
    else:
        for k, v in sorted(found.items()):
            print(f"{k}\t{', '.join(sorted(set(v))[:3])}")


if __name__ == "__main__":
    main()
