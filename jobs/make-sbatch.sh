#!/usr/bin/env bash
# jobs/make-sbatch.sh -- write a ready-to-submit SLURM batch script for one attnsweep sweep.
#
#   jobs/make-sbatch.sh CONFIG --nodes N --ntasks-per-node K --time TIME [OPTIONS] [-- RUN ARGS]
#
# The script is jobs/attnsweep.sbatch with its #SBATCH lines filled in: it runs
# `srun --mpi=TYPE build/attnsweep run CONFIG`, gets SIGUSR1 --warn seconds before the time limit,
# lets the sweep checkpoint (exit 3) and requeues itself until the sweep exits 0.
#
#   --nodes N, --ntasks-per-node K, --time TIME   the allocation of one segment (TIME as SLURM
#                        takes it: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS)
#   -N N, -n TOTAL, -t TIME, -p P, -A A   sbatch's short spellings; --opt=value works for every
#                        option. -n / --ntasks gives the total task count instead of
#                        --ntasks-per-node (then --nodes is optional)
#   --shards S           split the sweep into S shards run as a job array (--array=0-(S-1));
#                        task i runs `attnsweep run CONFIG --shard i/S`. S must fit the
#                        cluster's MaxArraySize (read from `scontrol show config`).
#   --parallel P         at most P shards at once (--array=...%P)
#   --merge              with --shards: also write MERGE.sbatch (attnsweep merge of the shards);
#                        --submit submits it with --dependency=afterok:ARRAY_JOB_ID
#   --setup 'CMD'        a shell line the job runs before the sweep, e.g. 'module load openmpi'
#                        (repeatable; runs in the job's shell, before srun/mpirun)
#   --warn SECONDS       warning before the time limit (default 300; < the time limit); the sweep
#                        then waits up to SECONDS minus a margin (warn/5, 30..120 s) for its
#                        running windows (runtime.stop_grace; 300 -> 240 s)
#   --launcher L         srun (default) or mpirun
#   --srun-mpi TYPE      srun's --mpi: auto (default: pmix if the cluster's srun offers it, else
#                        pmi2, else none), none, or a type (pmix, pmix_v4, pmi2, ...)
#   --bin PATH           the program (default: build/attnsweep of this checkout)
#   --name NAME          job name (default attnsweep-<config name>)
#   --logdir DIR         where the job logs go (default ./logs; created now)
#   --partition P, --account A, --qos Q, --mem M, --cpus-per-task C   passed to #SBATCH
#   --sbatch 'OPT'       any other #SBATCH option, repeatable (e.g. --sbatch '--exclusive')
#   --max-array-size N   use N instead of asking scontrol (e.g. writing on a laptop)
#   --max-segments N     requeue at most N times (default 100)
#   -o, --output FILE    the script to write (default <config name>.sbatch)
#   --no-check           do not run `attnsweep plan --check CONFIG` first (by default a config
#                        that run would refuse -- missing or short text, broken model, output
#                        of another config -- fails here, before the queue)
#   --dry-run            print the script on stdout, write and create nothing
#   --submit             sbatch the written script and print the job id
#
# Exit codes: 0 written (or submitted), 1 error (e.g. the plan does not fit MaxArraySize,
# sbatch failed), 2 bad usage. Errors are one line on stderr.
set -euo pipefail
prog=make-sbatch.sh
here=$(cd "$(dirname "$0")" && pwd)
template="$here/attnsweep.sbatch"
usage() { awk 'NR == 1 { next } !/^#/ { exit } !/^# shellcheck/ { sub(/^# ?/, ""); print }' "$0"; }
die() { echo "$prog: $1" >&2; exit "${2:-1}"; }

orig_args=("$@")
config='' nodes='' tasks='' time_limit='' shards='' parallel='' warn=300 launcher=srun bin='' name='' logdir='' srun_mpi=auto
output='' dry_run=0 submit=0 max_array_size='' max_segments='' ntasks='' merge=0 check=1
extra_sbatch=()
setup_lines=()
run_args=()
need() { [ "$2" -ge 2 ] || die "$1 needs a value (try --help)" 2; }
while [ $# -gt 0 ]; do
  # sbatch's spellings: --opt=value is --opt value; -N/-n/-t/-p/-A are the long options
  case "$1" in
    --?*=*) opt=${1%%=*} val=${1#*=}; shift; set -- "$opt" "$val" "$@" ;;
  esac
  case "$1" in
    -N) set -- --nodes "${@:2}" ;;
    -n) set -- --ntasks "${@:2}" ;;
    -t) set -- --time "${@:2}" ;;
    -p) set -- --partition "${@:2}" ;;
    -A) set -- --account "${@:2}" ;;
    -q) set -- --qos "${@:2}" ;;
    -c) set -- --cpus-per-task "${@:2}" ;;
    -J) set -- --name "${@:2}" ;;
  esac
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --ntasks) need "$1" $#; ntasks=$2; shift 2 ;;
    --job-name) need "$1" $#; name=$2; shift 2 ;;
    --setup) need "$1" $#; setup_lines+=("$2"); shift 2 ;;
    --merge) merge=1; shift ;;
    --no-check) check=0; shift ;;
    --nodes) need "$1" $#; nodes=$2; shift 2 ;;
    --ntasks-per-node) need "$1" $#; tasks=$2; shift 2 ;;
    --time) need "$1" $#; time_limit=$2; shift 2 ;;
    --shards) need "$1" $#; shards=$2; shift 2 ;;
    --parallel) need "$1" $#; parallel=$2; shift 2 ;;
    --warn) need "$1" $#; warn=$2; shift 2 ;;
    --launcher) need "$1" $#; launcher=$2; shift 2 ;;
    --srun-mpi) need "$1" $#; srun_mpi=$2; shift 2 ;;
    --bin) need "$1" $#; bin=$2; shift 2 ;;
    --name) need "$1" $#; name=$2; shift 2 ;;
    --logdir) need "$1" $#; logdir=$2; shift 2 ;;
    --partition|--account|--qos|--mem|--cpus-per-task)
      need "$1" $#; extra_sbatch+=("$1=$2"); shift 2 ;;
    --sbatch) need "$1" $#; extra_sbatch+=("$2"); shift 2 ;;
    --max-array-size) need "$1" $#; max_array_size=$2; shift 2 ;;
    --max-segments) need "$1" $#; max_segments=$2; shift 2 ;;
    -o|--output) need "$1" $#; output=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --submit) submit=1; shift ;;
    --) shift; run_args=("$@"); break ;;
    -*) die "unknown option '$1' (try --help)" 2 ;;
    *) [ -z "$config" ] || die "one CONFIG only (got '$config' and '$1'); sweep arguments go after --" 2
       config=$1; shift ;;
  esac
done

is_count() { case "$1" in ''|*[!0-9]*) return 1 ;; esac; [ "$1" -ge 1 ]; }
[ -n "$config" ] || die "missing CONFIG (try --help)" 2
[ -n "$tasks" ] || [ -n "$ntasks" ] || die "missing --ntasks-per-node K (or -n TOTAL)" 2
[ -z "$tasks" ] || [ -z "$ntasks" ] || die "give --ntasks-per-node or -n/--ntasks, not both" 2
[ -n "$nodes" ] || [ -n "$ntasks" ] || die "missing --nodes N" 2
[ -n "$time_limit" ] || die "missing --time TIME (e.g. 04:00:00)" 2
[ -z "$nodes" ] || is_count "$nodes" || die "--nodes '$nodes' is not a positive integer" 2
[ -z "$tasks" ] || is_count "$tasks" || die "--ntasks-per-node '$tasks' is not a positive integer" 2
[ -z "$ntasks" ] || is_count "$ntasks" || die "--ntasks '$ntasks' is not a positive integer" 2
is_count "$warn" || die "--warn '$warn' is not a positive number of seconds" 2
[ "$warn" -le 65535 ] || die "--warn $warn: SLURM allows at most 65535 s" 2
[ -z "$max_segments" ] || is_count "$max_segments" || die "--max-segments '$max_segments' is not a positive integer" 2
case "$launcher" in srun|mpirun) ;; *) die "--launcher '$launcher': use srun or mpirun" 2 ;; esac
[[ "$srun_mpi" =~ ^[A-Za-z0-9_]+$ ]] || die "--srun-mpi '$srun_mpi': use auto, none or an MPI type such as pmix or pmi2" 2
[ -f "$config" ] || die "$config: no such config file"

# SLURM time formats -> seconds
to_seconds() {
  local t=$1 d=0 h=0 m=0 s=0
  if [[ "$t" =~ ^([0-9]+)-([0-9]+)(:([0-9]+)(:([0-9]+))?)?$ ]]; then
    d=${BASH_REMATCH[1]} h=${BASH_REMATCH[2]} m=${BASH_REMATCH[4]:-0} s=${BASH_REMATCH[6]:-0}
  elif [[ "$t" =~ ^([0-9]+):([0-9]+):([0-9]+)$ ]]; then
    h=${BASH_REMATCH[1]} m=${BASH_REMATCH[2]} s=${BASH_REMATCH[3]}
  elif [[ "$t" =~ ^([0-9]+):([0-9]+)$ ]]; then
    m=${BASH_REMATCH[1]} s=${BASH_REMATCH[2]}
  elif [[ "$t" =~ ^([0-9]+)$ ]]; then
    m=${BASH_REMATCH[1]}
  else
    return 1
  fi
  echo $(( 10#$d * 86400 + 10#$h * 3600 + 10#$m * 60 + 10#$s ))
}
limit_s=$(to_seconds "$time_limit") || die "--time '$time_limit' is not a SLURM time (MM, HH:MM:SS, D-HH:MM:SS ...)" 2
[ "$limit_s" -gt 0 ] || die "--time '$time_limit' is zero" 2
[ "$warn" -lt "$limit_s" ] ||
  die "--warn $warn s is not shorter than the time limit $time_limit ($limit_s s): every segment would be told to stop at once" 2

array_line=''
if [ -n "$shards" ]; then
  is_count "$shards" || die "--shards '$shards' is not a positive integer" 2
  if [ -z "$max_array_size" ]; then
    if command -v scontrol >/dev/null 2>&1 &&
       max_array_size=$(timeout 20 scontrol show config 2>/dev/null |
                        awk -F= '/^MaxArraySize/ { gsub(/[ \t]/, "", $2); print $2 }') &&
       [ -n "$max_array_size" ]; then
      :
    else
      max_array_size=1001
      echo "$prog: note: could not ask scontrol for MaxArraySize; assuming SLURM's default 1001 (use --max-array-size)" >&2
    fi
  fi
  is_count "$max_array_size" || die "MaxArraySize '$max_array_size' is not a positive integer" 2
  if [ "$shards" -gt "$max_array_size" ]; then
    die "the plan does not fit: $shards shards need array indices 0..$((shards - 1)) but MaxArraySize is $max_array_size (indices 0..$((max_array_size - 1))); use --shards $max_array_size or fewer (each shard is requeued until it is done, so fewer shards only means longer chains)"
  fi
  array_line="0-$((shards - 1))"
  if [ -n "$parallel" ]; then
    is_count "$parallel" || die "--parallel '$parallel' is not a positive integer" 2
    [ "$parallel" -le "$shards" ] || die "--parallel $parallel is more than --shards $shards" 2
    array_line="$array_line%$parallel"
  fi
elif [ -n "$parallel" ]; then
  die "--parallel needs --shards" 2
fi
[ "$merge" = 0 ] || [ -n "$shards" ] || die "--merge needs --shards" 2

# What run would refuse, refused now: attnsweep plan --check (text, model, existing output).
bin_for_check=$(cd "$here/.." && pwd)/build/attnsweep   # this checkout's program (--bin may be a stand-in)
[ -x "$bin_for_check" ] || [ -z "$bin" ] || bin_for_check=$bin
plan_set=()
set_next=0
for a in "${run_args[@]+"${run_args[@]}"}"; do   # only the --set options of the run arguments
  if [ "$set_next" = 1 ]; then plan_set+=(--set "$a"); set_next=0
  elif [ "$a" = --set ]; then set_next=1
  else case "$a" in --set=*) plan_set+=("$a") ;; esac
  fi
done
if [ "$check" = 1 ]; then
  [ -x "$bin_for_check" ] || die "$bin_for_check: not built yet (jobs/setup.sh), so the config cannot be checked; build it or pass --no-check"
  # plan --porcelain: key=value lines on stdout (attnsweep plan --help lists the keys)
  plan_err=$(mktemp "${TMPDIR:-/tmp}/make-sbatch.XXXXXX")
  plan_out=$("$bin_for_check" plan "$config" --check --porcelain "${plan_set[@]+"${plan_set[@]}"}" 2>"$plan_err") ||
    { why=$(grep 'attnsweep plan:' "$plan_err" | grep -v ': warning: ' | tail -1 | sed 's/^attnsweep plan: //'); rm -f "$plan_err"
      die "attnsweep plan --check $config failed: $why"; }
  rm -f "$plan_err"
  n_windows=$(printf '%s\n' "$plan_out" | sed -n 's/^windows=//p')
  if [ -n "$shards" ] && [ -n "$n_windows" ] && [ "$shards" -gt "$n_windows" ]; then
    die "--shards $shards is more than the sweep's $n_windows windows: some shards would get no window (use --shards $n_windows or fewer)"
  fi
fi

stem=$(basename "$config"); stem=${stem%.*}
[ -n "$name" ] || name="attnsweep-$stem"
case "$name" in *[!A-Za-z0-9._-]*) die "--name '$name': use letters, digits, '.', '_' and '-'" 2 ;; esac
[ -n "$output" ] || output="$stem.sbatch"
[ -n "$logdir" ] || logdir=logs
[ -n "$bin" ] || bin="$(cd "$here/.." && pwd)/build/attnsweep"
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
config_abs=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")
bin_abs=$(abspath "$bin")
logdir_abs=$(abspath "$logdir")
[ -x "$bin_abs" ] || echo "$prog: note: $bin_abs is not an executable yet (build it before the job starts)" >&2
[ -r "$template" ] || die "$template: template missing"
grep -q '^# ==== body' "$template" || die "$template: no '# ==== body' line"

if [ -n "$shards" ]; then log_pattern="$logdir_abs/$name-%A_%a.out"; else log_pattern="$logdir_abs/$name-%j.out"; fi
script_args=()
[ -z "$shards" ] || script_args+=(--shards "$shards")
[ -z "$max_segments" ] || script_args+=(--max-segments "$max_segments")
script_args+=(--warn "$warn" --launcher "$launcher" --srun-mpi "$srun_mpi" --bin "$bin_abs" "$config_abs")
[ "${#run_args[@]}" = 0 ] || script_args+=(-- "${run_args[@]}")

generate() {
  echo '#!/usr/bin/env bash'
  echo "#SBATCH --job-name=$name"
  [ -z "$nodes" ] || echo "#SBATCH --nodes=$nodes"
  [ -z "$tasks" ] || echo "#SBATCH --ntasks-per-node=$tasks"
  [ -z "$ntasks" ] || echo "#SBATCH --ntasks=$ntasks"
  echo "#SBATCH --time=$time_limit"
  echo "#SBATCH --requeue"
  echo "#SBATCH --open-mode=append"
  echo "#SBATCH --signal=B:USR1@$warn"
  echo "#SBATCH --output=$log_pattern"
  [ -z "$array_line" ] || echo "#SBATCH --array=$array_line"
  local o
  for o in "${extra_sbatch[@]+"${extra_sbatch[@]}"}"; do echo "#SBATCH $o"; done
  echo "#"
  echo "# Written by jobs/make-sbatch.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ); submit with: sbatch $output"
  printf '# Command: make-sbatch.sh'; printf ' %q' "${orig_args[@]}"; echo
  echo "# The rest is jobs/attnsweep.sbatch (see there); its arguments are fixed here:"
  printf 'set --'; printf ' %q' "${script_args[@]}"; echo
  if [ "${#setup_lines[@]}" -gt 0 ]; then
    echo "# --setup lines: run before the sweep"
    local l
    for l in "${setup_lines[@]}"; do echo "$l || { echo \"attnsweep.sbatch: setup line failed: \"$(printf '%q' "$l") >&2; exit 1; }"; done
  fi
  sed -n '/^# ==== body/,$p' "$template" | tail -n +2
}

# The merge job of --merge: one task, after every array task succeeded (afterok).
merge_output=${output%.sbatch}.merge.sbatch
generate_merge() {
  echo '#!/usr/bin/env bash'
  echo "#SBATCH --job-name=$name-merge"
  echo "#SBATCH --ntasks=1"
  echo "#SBATCH --time=01:00:00"
  echo "#SBATCH --output=$logdir_abs/$name-merge-%j.out"
  local o
  for o in "${extra_sbatch[@]+"${extra_sbatch[@]}"}"; do echo "#SBATCH $o"; done
  echo "# Written by jobs/make-sbatch.sh --merge: joins the $shards shard files of $output's array."
  echo "# make-sbatch.sh --submit submits it with --dependency=afterok:ARRAY_JOB_ID."
  echo "set -euo pipefail"
  for l in "${setup_lines[@]+"${setup_lines[@]}"}"; do echo "$l"; done
  printf 'cd %q\n' "$PWD"
  # the config's output, from plan --porcelain (with the run's --set options, if any)
  printf 'out=$(%q plan %q --porcelain' "$bin_abs" "$config_abs"
  [ "${#plan_set[@]}" = 0 ] || printf ' %q' "${plan_set[@]}"
  printf " | sed -n 's/^output=//p')\n"
  printf '[ -n "$out" ] || { echo "%s: attnsweep plan printed no output= line" >&2; exit 1; }\n' "$name-merge"
  echo 'case $out in *.h5|*.nc) stem=${out%.*} ext=.${out##*.} ;; *) stem=$out ext= ;; esac'
  printf 'exec %q merge "$stem".shard-*-of-%s"$ext"\n' "$bin_abs" "$shards"
}

if [ "$dry_run" = 1 ]; then
  generate
  [ "$merge" = 0 ] || { echo "# ---- $merge_output ----"; generate_merge; }
  echo "$prog: dry run: would write $output (logs in $logdir_abs)" >&2
  exit 0
fi
mkdir -p "$logdir_abs" || die "$logdir_abs: cannot create the log directory"
tmp="$output.tmp.$$"
generate > "$tmp" || { rm -f "$tmp"; die "$output: cannot write"; }
chmod +x "$tmp"
mv -f "$tmp" "$output"
echo "$prog: wrote $output${array_line:+ (array $array_line)}; logs go to $logdir_abs" >&2
if [ "$merge" = 1 ]; then
  generate_merge > "$merge_output.tmp.$$" && chmod +x "$merge_output.tmp.$$" &&
    mv -f "$merge_output.tmp.$$" "$merge_output" || die "$merge_output: cannot write"
  echo "$prog: wrote $merge_output (the merge job, afterok of the array)" >&2
fi
if [ "$submit" = 1 ]; then
  job=$(sbatch --parsable "$output" 2>&1) || die "sbatch $output failed: ${job//$'\n'/ }"
  echo "$job"
  if [ "$merge" = 1 ]; then
    mjob=$(sbatch --parsable --dependency="afterok:${job%%;*}" "$merge_output" 2>&1) ||
      die "sbatch $merge_output failed: ${mjob//$'\n'/ }"
    echo "$mjob"
  fi
else
  echo "sbatch $output"
  [ "$merge" = 0 ] || echo "sbatch --dependency=afterok:ARRAY_JOB_ID $merge_output   # or use --submit"
fi
