#!/bin/sh
# loader_cli.sh ATTNSWEEP SCRATCH_DIR -- attnsweep synth's command line:
# --help, one-line errors with the documented exit codes, refusal to
# overwrite, --force.
set -u
exe=$1
dir=$2
rm -rf "$dir"
mkdir -p "$dir"
fails=0
expect() { # expect CODE LINES_ON_STDERR WORD -- args...
    code=$1 lines=$2 word=$3
    shift 3
    "$exe" "$@" >"$dir/out" 2>"$dir/err"
    rc=$?
    n=$(wc -l <"$dir/err")
    if [ "$rc" != "$code" ] || [ "$n" != "$lines" ] || { [ -n "$word" ] && ! grep -q -- "$word" "$dir/err" "$dir/out"; }; then
        echo "FAIL: attnsweep $*: exit $rc (want $code), $n stderr lines (want $lines), want '$word':"
        cat "$dir/err"
        fails=$((fails + 1))
    fi
}
expect 0 0 "usage: attnsweep synth" synth --help
expect 2 1 "required" synth --preset tiny
expect 2 1 "unknown preset 'huge'" synth --preset huge --out "$dir/m"
expect 2 1 "--seed 'x1'" synth --preset tiny --seed x1 --out "$dir/m"
expect 2 1 "--seed '-1'" synth --preset tiny --seed -1 --out "$dir/m"
expect 2 1 "--seed '99999999999999999999'" synth --preset tiny --seed 99999999999999999999 --out "$dir/m"
expect 2 1 "unknown option '--bogus'" synth --bogus
expect 2 1 "--out needs a value" synth --preset tiny --out
expect 0 0 "" synth --preset tiny --seed 18446744073709551615 --out "$dir/m"
expect 1 1 "already holds a model (use --force" synth --preset tiny --seed 3 --out "$dir/m"
expect 0 0 "" synth --preset tiny --seed 3 --out "$dir/m" --force
grep -q '"attnsweep_seed": 3,' "$dir/m/config.json" || { echo "FAIL: seed not recorded"; fails=$((fails + 1)); }
ls "$dir/m" | grep -q tmp && { echo "FAIL: temporary file left"; fails=$((fails + 1)); }
touch "$dir/file"
expect 1 1 "$dir/file" synth --preset tiny --out "$dir/file/m"
rm -rf "$dir"
[ "$fails" = 0 ] && echo "loader_cli: ok"
exit "$fails"
