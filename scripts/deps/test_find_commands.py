"""Unit tests of find-commands.py: what it must count as a command, and what it must not.

Each case is a shell or Python snippet and the commands the scanner must find in it. Run:
  python3 -m pytest -q scripts/deps/test_find_commands.py
"""

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("find_commands", Path(__file__).with_name("find-commands.py"))
fc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fc)

RESERVED = fc.bash_reserved()


def shell(text):
    found = {}
    fc.scan_shell("t.sh", text, RESERVED, found)
    return set(found)


def python(text):
    found = {}
    fc.scan_python("t.py", text, found)
    return set(found)


@pytest.mark.parametrize(
    "text, want",
    [
        ("ip link add a type veth peer name b\n", {"ip"}),
        # Wrappers are commands themselves, and so is what they run.
        ("ip netns exec ns1 ping -c1 10.0.0.1\n", {"ip", "ping"}),
        ("timeout 5 curl -s http://x\n", {"timeout", "curl"}),
        ("nice -n 10 cargo build\n", {"nice", "cargo"}),
        ("env -u X FOO=1 BAR=2 tc qdisc show\n", {"env", "tc"}),
        ("sudo -u nobody id\n", {"sudo", "id"}),
        # Options that take a value: the value is not a command.
        ("unshare --propagation private --mount mount -t tmpfs x /mnt\n", {"unshare", "mount"}),
        ("unshare --time --fork --monotonic 1000 sleep 1\n", {"unshare", "sleep"}),
        ("unshare --time --fork --monotonic=1000 sleep 1\n", {"unshare", "sleep"}),
        # Assignments, redirections, builtins and keywords are not commands.
        ("X=1 Y=2 jq . <in >out 2>&1\n", {"jq"}),
        ("if true; then echo hi; fi\n", set()),
        ("for t in a b; do :; done\n", set()),
        ("local x=$(awk '{print}' f)\n", {"awk"}),
        # An array's values are not commands; a substitution inside one is.
        ("local a=$1 list=() c\nlist+=(\"$c\" x)\ny=(a\n  b)\nz=($(uname -m))\n", {"uname"}),
        # Pipelines and lists: every command of them.
        ("grep x f | sort | uniq -c && wc -l f || tr a b\n", {"grep", "sort", "uniq", "wc", "tr"}),
        # Command substitution and bash -c strings are scanned.
        ('v=$(sha256sum f)\n', {"sha256sum"}),
        ("bash -c 'ethtool -a eth0'\n", {"bash", "ethtool"}),
        # The script's own functions are not host commands; a function running "$@" is a
        # wrapper whose arguments are.
        ("f() { echo; }\nf a b\n", set()),
        ('inns() { shift; "$@"; }\ninns ns1 ss -tln\n', {"ss"}),
        # A case pattern is not a command.
        ("case $x in a) sed -n 1p f ;; esac\n", {"sed"}),
        # Absolute paths are commands, scratch paths are not.
        ("/usr/sbin/sshd -t\n/tmp/x/run.sh\n", {"/usr/sbin/sshd"}),
        # A script's own list of the tools it checks for.
        ('for t in qemu-img mkfs.ext4; do command -v "$t" >/dev/null; done\n', {"qemu-img", "mkfs.ext4"}),
    ],
)
def test_shell(text, want):
    assert shell(text) == want


@pytest.mark.parametrize(
    "text, want",
    [
        ('subprocess.run(["ip", "netns", "add", n], check=True)\n', {"ip"}),
        ('subprocess.Popen(["ip", "netns", "exec", n, "tcpdump", "-n"])\n', {"ip", "tcpdump"}),
        ('run(["tc", "qdisc"] + extra)\n', {"tc"}),
        # An argv built at run time names no command the scanner can know.
        ("subprocess.run(argv)\n", set()),
        ("print(['ls'])\n", set()),
        # A syntax error is not a crash.
        ("def (:\n", set()),
    ],
)
def test_python(text, want):
    assert python(text) == want


def test_rust():
    found = {}
    fc.scan_rust("x.rs", 'let o = Command::new("mkfs.ext4").arg("-F");\nCommand::new( "sfdisk" )\n', found)
    assert set(found) == {"mkfs.ext4", "sfdisk"}
    assert found["sfdisk"] == ["x.rs:2"]
