#!/usr/bin/env bash
# The JVM stage of scripts/test.sh: build and install the jar (Maven runs `cargo build --workspace --all-targets`,
# the build stage's own command in the same target dir and debug profile, so a no-op after it, and packs
# libfencelock_jni.so into the jar),
# run the JUnit suite (conformance on every backend, Java idioms, metrics, interop with Redisson and Curator), build
# and test the optional Micrometer binder (jvm/micrometer) against it, then run the example project in examples/java
# against the installed artifact on SQLite and Redis.
#
#   jvm/run-tests.sh [MAVEN ARGS...]      e.g. -Dtest=ApiTest
#
# Uses the servers of scripts/services.sh when FENCELOCK_TEST_* are set (source DIR/env first); with
# FENCELOCK_REQUIRE_SERVICES=1 a missing one fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MVN=(mvn -B -ntp -q -Dstyle.color=never)

# Maven quiet, without the colour resets Maven 3.8 prints even in batch mode; keeps Maven's exit status (pipefail).
mvn_quiet() { "${MVN[@]}" "$@" 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g'; }

step() { printf -- '--- %s\n' "$*"; }

# Debian packages: install what is missing if we may (CI runs as root), else say what to install.
need() { # COMMAND PACKAGE
    command -v "$1" >/dev/null && return
    if ((EUID == 0)) && command -v apt-get >/dev/null; then
        apt-get install -y -q "$2" >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q "$2" >/dev/null; }
    fi
    command -v "$1" >/dev/null || { echo "jvm: $1 is missing: install the Debian package $2" >&2; exit 1; }
}
need javac openjdk-17-jdk-headless
need mvn maven
need objcopy binutils

java_version=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
if ((${java_version%%.*} < 17)); then
    echo "jvm: Java 17 or newer is needed, java is $java_version ($(command -v java))" >&2
    exit 1
fi
step "$(mvn -v 2>/dev/null | head -1 | sed 's/\x1b\[[0-9;]*m//g'), Java $java_version"

# The suite's summary from surefire's reports (-q keeps Maven quiet).
summary() { # MODULE-DIR NAME
    [[ -d $1/target/surefire-reports ]] || return 0
    awk -v name="$2" '/^Tests run:/ { split($0, f, /[:,] */); run += f[2]; failed += f[4] + f[6]; skipped += f[8] }
         END { printf "%s: %d passed, %d failed, %d skipped\n", name, run - failed - skipped, failed, skipped }' \
        "$1"/target/surefire-reports/*.txt
}

step "mvn install (cargo build --workspace --all-targets, jar, JUnit)"
rc=0
rm -rf "$ROOT/jvm/target/surefire-reports" "$ROOT/jvm/target/conformance-matrix.txt" # no stale results below
# `-p fencelock-jvm` alone would unify dependency features differently from the workspace build and compile a
# second variant of much of the graph; the workspace build's command is a no-op here.
mvn_quiet -f "$ROOT/jvm" install -Dfencelock.cargo.select=--workspace -Dfencelock.cargo.targets=--all-targets "$@" ||
    rc=$?
cat "$ROOT/jvm/target/conformance-matrix.txt" 2>/dev/null || true
summary "$ROOT/jvm" jvm
((rc == 0)) || exit "$rc"
reports=$ROOT/jvm/target/surefire-reports

# The optional Micrometer artifact, built and tested against the jar just installed (Micrometer from Maven Central).
step "mvn install jvm/micrometer (FencelockMeterBinder, JUnit)"
rm -rf "$ROOT/jvm/micrometer/target/surefire-reports"
mvn_quiet -f "$ROOT/jvm/micrometer" install -Dsurefire.failIfNoSpecifiedTests=false "$@" || rc=$?
summary "$ROOT/jvm/micrometer" jvm/micrometer
((rc == 0)) || exit "$rc"

# The README promises that virtual threads never pin their carrier; Java 17 has none, so that test is skipped above.
# Run it again on a JDK with them (the image has a Temurin JDK beside Debian's 17; FENCELOCK_VTHREAD_JAVA overrides),
# with two carriers, so a pinned waiter would starve the others whatever the core count.
java_feature() { "$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p'; }
vt_java=
for j in ${FENCELOCK_VTHREAD_JAVA:-} /usr/lib/jvm/*/bin/java /opt/*/bin/java /opt/*/*/bin/java; do
    if [[ -x $j ]] && v=$(java_feature "$j") && [[ -n $v ]] && ((${v%%.*} >= 21)); then
        vt_java=$j
        break
    fi
done
if [[ -n $vt_java ]]; then
    step "virtual threads on Java $(java_feature "$vt_java") ($vt_java)"
    mvn_quiet -f "$ROOT/jvm" surefire:test -Djvm="$vt_java" -Dtest='ApiTest#virtualThreadsParkInJava' \
        -Dsurefire.failIfNoSpecifiedTests=true -DargLine="--enable-native-access=ALL-UNNAMED -Dfencelock.requireVirtualThreads=true \
        -Djdk.virtualThreadScheduler.parallelism=2 -Djdk.virtualThreadScheduler.maxPoolSize=2"
    awk '/^Tests run:/ { split($0, f, /[:,] */); if (f[2] != 1 || f[4] + f[6] + f[8] != 0) bad = 1 }
         END { exit bad }' "$reports"/dev.fencelock.ApiTest.txt ||
        { echo "jvm: the virtual-thread test did not run and pass" >&2; exit 1; }
    echo "jvm: virtual threads: passed"
elif [[ ${FENCELOCK_REQUIRE_SERVICES:-} == 1 ]]; then
    echo "jvm: no JDK 21+ found for the virtual-thread test (set FENCELOCK_VTHREAD_JAVA)" >&2
    exit 1
else
    echo "jvm: virtual threads: skipped (no JDK 21+ found; set FENCELOCK_VTHREAD_JAVA)"
fi

step "examples/java against the installed artifact"
examples=(sqlite:"$ROOT/target/jvm-example.db")
if [[ -n ${FENCELOCK_TEST_REDIS:-} ]]; then examples+=("$FENCELOCK_TEST_REDIS"); fi
mvn_quiet -f "$ROOT/examples/java" compile
for url in "${examples[@]}"; do
    for main in example.Locks example.Election; do
        mvn_quiet -f "$ROOT/examples/java" exec:exec -Dexample.url="$url" -Dexample.main="$main"
    done
done
rm -f "$ROOT/target/jvm-example.db"
echo "jvm: all passed"
