"""Properties files read exactly as Kafka's tools read them, checked against Java itself.

Hundreds of generated files (every construct of the format, CR/LF/CRLF, ISO-8859-1 bytes, escapes,
continuations, trailing spaces, JAAS options with StreamTokenizer escapes) are read by
``java.util.Properties.load`` and Kafka's JAAS parser in one JVM (tests/unit/vectors/PropertiesDump.java),
and by kafkatxn; every key, value, username and password must come out the same. Needs java and the
Kafka jars the harness caches (``python -m harness fetch``); skipped without them.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.jars import cache_root, default_kafka_version
from kafkatxn import config
from kafkatxn.config import properties
from kafkatxn.errors import UsageError

DUMP = Path(__file__).parent / "vectors" / "PropertiesDump.java"
MODULES = ("org.apache.kafka.common.security.plain.PlainLoginModule", "org.apache.kafka.common.security.scram.ScramLoginModule")

HAND_WRITTEN = [
    b"a=1\\\n  b\nk\\u00e9y = v  \n",
    b"# c\n! c\n  # indented comment\nkey value with  spaces  \n",
    b"key\\ with\\ spaces=1\nkey\\:colon:2\nkey\\=eq=3\n",
    b"a=\\\n\nb=2",  # a continuation into an empty line ends the value
    b"x=ends with backslash\\",  # a lone backslash at the end of the file
    b"even=two\\\\\nnext=1\n",  # an escaped backslash does not continue the line
    b"latin=caf\xe9\nutf8=caf\xc3\xa9\n",  # raw bytes: ISO-8859-1
    b"emoji=\\ud83d\\ude00\n",
    b"bad=\\u12\n",  # malformed \\uxxxx: both refuse
    b"\x0ckey\x0cvalue\x0c\n\tt\t=\tv\t\n",
    b"cr=1\rcrlf=2\r\nlf=3\n",
    b"k=v\\\r\n   continued\r\n",
    b"dup=first\ndup=second\n",
    b"onlykey\nkey:\n=value without key\n: also\n",
    b'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="u\\\\n1" password="p\\\\101\\\\q";\n',
    b'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n  username="a b" \\\n  password="c \\\\"d\\\\" e";\n',
    b"sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=plain password=pw ;  \n",
]


def _libs() -> Path | None:
    version_dir = cache_root() / f"kafka-{default_kafka_version()}"
    return version_dir / "libs" if (version_dir / "FETCH_COMPLETE").exists() else None


def _java_read(paths: list[Path]) -> dict[str, dict]:
    libs = _libs()
    if shutil.which("java") is None or libs is None:
        pytest.skip("needs java and the Kafka jars (python -m harness fetch)")
    done = subprocess.run(
        ["java", "-cp", f"{libs}/*", str(DUMP), *map(str, paths)], capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, dict] = {}
    current: dict = {}
    for line in done.stdout.splitlines():
        kind, *rest = line.split(" ")
        if kind == "F":
            current = out.setdefault(line[2:], {"entries": {}, "refused": False, "jaas": None})
        elif kind == "E":
            current["entries"][_unhex(rest[0])] = _unhex(rest[1])
        elif kind == "X":
            current["refused"] = True
        elif kind == "J":
            current["jaas"] = (_unhex(rest[0]), _unhex(rest[1]))
        elif kind == "JX":
            current["jaas"] = "refused"
    return out


def _unhex(text: str) -> str:
    return "" if text == "-" else bytes.fromhex(text).decode("utf-16-be", "surrogatepass")


# -- generated files --------------------------------------------------------------------------------

KEY_PIECES = ["a", "sasl", ".", "key", "x1", "\\ ", "\\:", "\\=", "\\u00e9", "\\t", "\\n", "\\\\", "-", "_", "\xe9", "\\#"]
VALUE_PIECES = [
    "v", "secret", " ", "  ", "#", "!", "=", ":", "\\u0041", "\\u00e4", "\\u20ac", "\\\\", "\\t", "\\n", "\\r",
    "\\ ", "\xe9", "\xff", "\\q", "\t", "\x0c", "${env:X}", "\\\n   ", "\\\r\n\t", "\\\r",
]
SEPARATORS = ["=", ":", " ", "\t", " = ", "  :  ", "\x0c", "=  ", " \t:", "==", "=:"]
NEWLINES = ["\n", "\r\n", "\r"]


def _jaas_value(rnd: random.Random) -> str:
    def quoted() -> str:
        pieces = ["u", "p w", "\\\\n", "\\\\101", "\\\\q", "\\\\\\\\", '\\\\"', "=", ";", "#", "\\u00e9", " ", ":"]
        return '"' + "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6))) + '"'

    def option(name: str) -> str:
        value = quoted() if rnd.random() < 0.8 else rnd.choice(["plain", "pw123", "a-b"])
        return f"{name}{rnd.choice(['=', ' = ', '='])}{value}"

    opts = [option("username"), option("password")]
    rnd.shuffle(opts)
    glue = rnd.choice([" ", "  ", " \\\n    "])
    return f"{rnd.choice(MODULES)} required{glue}{glue.join(opts)}{rnd.choice([';', ' ;', ';  '])}"


def _generated(rnd: random.Random) -> bytes:
    newline = rnd.choice(NEWLINES)
    lines = []
    for _ in range(rnd.randint(1, 8)):
        kind = rnd.random()
        if kind < 0.1:
            lines.append(rnd.choice([" ", "\t", ""]) + rnd.choice("#!") + "".join(rnd.choice(VALUE_PIECES) for _ in range(3)).replace("\\\n", ""))
        elif kind < 0.15:
            lines.append(rnd.choice(["", " ", "\t\x0c"]))
        elif kind < 0.3:
            lines.append(f"sasl.jaas.config{rnd.choice(SEPARATORS)}{_jaas_value(rnd)}")
        else:
            key = "".join(rnd.choice(KEY_PIECES) for _ in range(rnd.randint(1, 4)))
            value = "".join(rnd.choice(VALUE_PIECES) for _ in range(rnd.randint(0, 6)))
            lines.append(rnd.choice(["", " ", "\t"]) + key + rnd.choice(SEPARATORS) + value)
    text = newline.join(lines) + rnd.choice([newline, "", "\\"])
    return text.encode("iso-8859-1", errors="replace")


def test_kafkatxn_reads_every_file_as_kafkas_tools_do(tmp_path, figures):
    rnd = random.Random(17)
    files = HAND_WRITTEN + [_generated(rnd) for _ in range(600)]
    paths = []
    for i, data in enumerate(files):
        path = tmp_path / f"f{i:04d}.properties"
        path.write_bytes(data)
        paths.append(path)
    java = _java_read(paths)
    compared = jaas_compared = 0
    for path, data in zip(paths, files):
        theirs = java[str(path)]
        try:
            lines = config.load_properties_file(path)
        except UsageError as exc:
            assert theirs["refused"], f"{data!r}: kafkatxn refused ({exc}), Java read {theirs['entries']}"
            continue
        assert not theirs["refused"], f"{data!r}: Java refused it, kafkatxn read it"
        ours = {line.key: line.value for line in lines}
        assert ours == theirs["entries"], f"{data!r}"
        compared += 1
        if theirs["jaas"] is not None:
            jaas = [line for line in lines if line.key == "sasl.jaas.config"][-1]
            jaas = config.PropertyLine(jaas.source, jaas.line, jaas.key, jaas.value.strip(properties._JAVA_TRIMMED))
            if theirs["jaas"] == "refused":
                with pytest.raises(UsageError):
                    properties._parse_jaas(jaas)
            else:
                assert properties._parse_jaas(jaas) == theirs["jaas"], f"{data!r}"
            jaas_compared += 1
    figures["properties files read as Java reads them"] = f"{compared}/{len(files)} ({jaas_compared} JAAS configs)"
    assert compared > len(files) * 0.8 and jaas_compared > 50
