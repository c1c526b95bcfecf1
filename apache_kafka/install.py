"""Fetch Apache Kafka's jars for the release `pom.xml` pins, once, into `.cache/kafka/<version>/`.

    python -m apache_kafka.install [--quiet]

Maven resolves `kafka_2.13` and its dependencies from Maven Central and copies them into
`lib/`; a `complete` stamp written last says the folder is whole, so an interrupted fetch is
redone, never used. Prints the size and the time it took. Exit 1 with Maven's error line when
Maven is missing or the release does not resolve.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
ROOT = HERE.parent
_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def _version() -> str:
    node = ET.parse(POM).getroot().find("m:properties/m:kafka.version", _NS)
    if node is None or not (node.text or "").strip():
        raise RuntimeError(f"{POM}: no <kafka.version> property")
    return node.text.strip()


KAFKA_VERSION = _version()


class InstallError(RuntimeError):
    """Kafka's jars are not there and could not be fetched: one line saying why."""


def cache_dir() -> Path:
    """Where the jars go: $ISRLAB_KAFKA_CACHE, else .cache/kafka/<version> in the checkout."""
    base = os.environ.get("ISRLAB_KAFKA_CACHE")
    return Path(base) / KAFKA_VERSION if base else ROOT / ".cache" / "kafka" / KAFKA_VERSION


def classpath() -> str:
    """The JVM classpath of the fetched jars; InstallError when they are not fetched."""
    lib = cache_dir() / "lib"
    if not (cache_dir() / "complete").is_file():
        raise InstallError(f"Apache Kafka {KAFKA_VERSION} is not fetched ({lib}): run "
                           "`python -m apache_kafka.install` (make does it)")
    return str(lib / "*")


def java() -> str:
    found = shutil.which("java")
    if not found:
        raise InstallError("java: not found (Kafka needs Java 17 or newer)")
    return found


def install(quiet: bool = False) -> dict:
    """Fetch the jars unless already whole; return {"jars", "bytes", "seconds", "fetched"}."""
    target = cache_dir()
    lib = target / "lib"
    start = time.monotonic()
    fetched = False
    if not (target / "complete").is_file():
        mvn = shutil.which("mvn")
        if not mvn:
            raise InstallError("mvn: not found (Apache Maven fetches Kafka's jars)")
        shutil.rmtree(lib, ignore_errors=True)
        lib.mkdir(parents=True, exist_ok=True)
        cmd = [mvn, "-B", "-q", "-f", str(POM), "dependency:copy-dependencies",
               f"-DoutputDirectory={lib}", "-DincludeScope=runtime"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            lines = [x for x in (done.stdout + done.stderr).splitlines() if "ERROR" in x]
            raise InstallError(f"mvn dependency:copy-dependencies failed: "
                               f"{(lines or ['exit ' + str(done.returncode)])[0][:300]}")
        (target / "complete").write_text(KAFKA_VERSION + "\n")
        fetched = True
    jars = sorted(lib.glob("*.jar"))
    return {"jars": len(jars), "bytes": sum(j.stat().st_size for j in jars),
            "seconds": time.monotonic() - start, "fetched": fetched}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m apache_kafka.install",
                                description=__doc__.splitlines()[0])
    p.add_argument("--quiet", action="store_true", help="say nothing when already fetched")
    args = p.parse_args(argv)
    try:
        done = install(args.quiet)
    except InstallError as error:
        print(f"apache_kafka.install: {error}", file=sys.stderr)
        return 1
    if done["fetched"] or not args.quiet:
        verb = "fetched" if done["fetched"] else "already fetched"
        print(f"Apache Kafka {KAFKA_VERSION}: {done['jars']} jars, "
              f"{done['bytes'] / 1e6:.1f} MB, {verb} in {done['seconds']:.1f} s "
              f"({cache_dir()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
