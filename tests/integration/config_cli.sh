#!/bin/sh
# config_cli.sh -- `attnsweep plan` on configs/example.cfg with a tiny model.
# usage: config_cli.sh ATTNSWEEP EXAMPLE_CFG MODEL_DIR
# Checks exit codes, the cell count, --list order and one-line errors naming the key.
set -u
BIN=$1 CFG=$2 MODEL=$3
fail=0
check() { # check LABEL CONDITION-RESULT
    if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi
}
out=$(mktemp) ; errf=$(mktemp)
trap 'rm -f "$out" "$errf"' EXIT
M="model=\"$MODEL\""

"$BIN" plan --help >"$out" 2>&1; check "--help exits 0" $?
grep -q "usage: attnsweep plan" "$out"; check "--help prints usage" $?

"$BIN" plan >"$out" 2>"$errf"; test $? -eq 2; check "no CONFIG -> exit 2" $?
"$BIN" plan "$CFG" --bogus >"$out" 2>"$errf"; test $? -eq 2; check "unknown option -> exit 2" $?

# example.cfg as shipped, with the tiny model (n_positions 128) and L within it
"$BIN" plan "$CFG" --set "$M" --set "grid.L=[32,64,128]" --set windows.count=2 --list >"$out" 2>"$errf"
check "plan example.cfg exits 0 ($(cat "$errf"))" $?
grep -Eq "^cells +6 \(2 windows x 3 L\)" "$out"; check "6 cells" $?

# disk: a compressed output (the default) is counted at 1.4x below plain size
disk_of() { "$BIN" plan "$CFG" --set "$M" --set "grid.L=[32,64,128]" --set windows.count=2000 "$@" 2>/dev/null |
            awk '/^disk / {v = $2; u = $3; f = u == "GiB" ? 1024 : u == "MiB" ? 1 : u == "KiB" ? 1 / 1024 : -1;
                           print v * f, ($0 ~ /compressed: estimated at 1\.4x/) ? "c" : "p"}'; }
dc=$(disk_of); dp=$(disk_of --set runtime.compress=false)
echo "$dc $dp" | awk '{r = $3 / $1; exit !($2 == "c" && $4 == "p" && r > 1.35 && r < 1.45)}'
check "disk: compressed counted at 1.4x below plain ($dc vs $dp)" $?
grep -Eq "^  N +128: 1\.\.128" "$out"; check "N axis 1..128" $?
grep -Eq "^  T +22: " "$out"; check "T axis: 21 log values + 8.0" $?
grep -Eq "^  layer +2: 0, 1" "$out"; check "layers all -> 0, 1" $?
grep -Eq "^memory " "$out" && grep -Eq "^output " "$out" && grep -Eq "^time " "$out"
check "time, memory, output lines" $?
# --list: 6 rows, L non-increasing, windows ascending within an L
awk '/^dispatch/ {on=1; next} on && NF==6 {print $5, $3}' "$out" >"$errf"
test "$(wc -l <"$errf")" -eq 6; check "--list prints 6 cells" $?
test "$(cat "$errf" | tr '\n' ' ')" = "128 0 128 1 64 0 64 1 32 0 32 1 "
check "--list in dispatch order (largest L first, then window)" $?

# --ranks: the node's memory and time for that many ranks; weights once per node
"$BIN" plan "$CFG" --set "$M" --set "grid.L=[32,64,128]" --set windows.count=2 --ranks 3 >"$out" 2>"$errf"
grep -Eq "^          node total for 3 ranks \(--ranks\): " "$out" &&
    grep -Eq "^          3 ranks \(2 workers, --ranks\): " "$out" &&
    grep -Eq "^memory    weights .*, once per node" "$out"
check "--ranks 3: node total and time" $?
"$BIN" plan "$CFG" --set "$M" --ranks 2.5 >"$out" 2>"$errf"; test $? -eq 2; check "--ranks 2.5 -> exit 2" $?

# errors: exit 1, one line, naming the key
"$BIN" plan "$CFG" --set "$M" >"$out" 2>"$errf"; test $? -eq 1; check "L beyond context -> exit 1" $?
grep -q "grid.L" "$errf" && test "$(wc -l <"$errf")" -eq 1; check "message names grid.L in one line" $?
"$BIN" plan "$CFG" --set "$M" --set "grid.L=[64]" --set metrics.sed=2 >"$out" 2>"$errf"
grep -q "metrics.sed.*did you mean metrics.seed" "$errf"; check "unknown --set key suggests metrics.seed" $?

# the canonical hash changes with a value and not with an equivalent spelling
h1=$("$BIN" plan "$CFG" --set "$M" --set "grid.L=[64,32]" | sed -n 's/.*sha256 \([0-9a-f]*\).*/\1/p')
h2=$("$BIN" plan "$CFG" --set "$M" --set "grid.L=[32,64]" | sed -n 's/.*sha256 \([0-9a-f]*\).*/\1/p')
h3=$("$BIN" plan "$CFG" --set "$M" --set "grid.L=[32,64]" --set metrics.seed=2 | sed -n 's/.*sha256 \([0-9a-f]*\).*/\1/p')
test -n "$h1" && test "$h1" = "$h2" && test "$h1" != "$h3"; check "hash: order-independent, value-dependent" $?

exit $fail
