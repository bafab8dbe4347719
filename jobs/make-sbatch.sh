#!/usr/bin/env bash
# jobs/make-sbatch.sh -- write a ready-to-submit SLURM batch script for one attnsweep sweep.
#
#   jobs/make-sbatch.sh CONFIG --nodes N --ntasks-per-node K --time TIME [OPTIONS] [-- RUN ARGS]
#
# The script is jobs/attnsweep.sbatch with its #SBATCH lines filled in: it runs
# `srun --mpi=pmix build/attnsweep run CONFIG`, gets SIGUSR1 --warn seconds before the time limit,
# lets the sweep checkpoint (exit 3) and requeues itself until the sweep exits 0.
#
#   --nodes N, --ntasks-per-node K, --time TIME   the allocation of one segment (TIME as SLURM
#                        takes it: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS)
#   --shards S           split the sweep into S shards run as a job array (--array=0-(S-1));
#                        task i runs `attnsweep run CONFIG --shard i/S`. S must fit the
#                        cluster's MaxArraySize (read from `scontrol show config`).
#   --parallel P         at most P shards at once (--array=...%P)
#   --warn SECONDS       warning before the time limit (default 300; < the time limit); the sweep
#                        then waits up to SECONDS minus a margin (warn/5, 30..120 s) for its
#                        running windows (runtime.stop_grace; 300 -> 240 s)
#   --launcher L         srun (default) or mpirun
#   --bin PATH           the program (default: build/attnsweep of this checkout)
#   --name NAME          job name (default attnsweep-<config name>)
#   --logdir DIR         where the job logs go (default ./logs; created now)
#   --partition P, --account A, --qos Q, --mem M, --cpus-per-task C   passed to #SBATCH
#   --sbatch 'OPT'       any other #SBATCH option, repeatable (e.g. --sbatch '--exclusive')
#   --max-array-size N   use N instead of asking scontrol (e.g. writing on a laptop)
#   --max-segments N     requeue at most N times (default 100)
#   -o, --output FILE    the script to write (default <config name>.sbatch)
#   --dry-run            print the script on stdout, write and create nothing
#   --submit             sbatch the written script and print the job id
#
# Exit codes: 0 written (or submitted), 1 error (e.g. the plan does not fit MaxArraySize,
# sbatch failed), 2 bad usage. Errors are one line on stderr.
set -euo pipefail
prog=make-sbatch.sh
here=$(cd "$(dirname "$0")" && pwd)
template="$here/attnsweep.sbatch"
usage() { sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "$prog: $1" >&2; exit "${2:-1}"; }

orig_args=("$@")
config='' nodes='' tasks='' time_limit='' shards='' parallel='' warn=300 launcher=srun bin='' name='' logdir=''
output='' dry_run=0 submit=0 max_array_size='' max_segments=''
extra_sbatch=()
run_args=()
need() { [ "$2" -ge 2 ] || die "$1 needs a value (try --help)" 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --nodes) need "$1" $#; nodes=$2; shift 2 ;;
    --ntasks-per-node) need "$1" $#; tasks=$2; shift 2 ;;
    --time) need "$1" $#; time_limit=$2; shift 2 ;;
    --shards) need "$1" $#; shards=$2; shift 2 ;;
    --parallel) need "$1" $#; parallel=$2; shift 2 ;;
    --warn) need "$1" $#; warn=$2; shift 2 ;;
    --launcher) need "$1" $#; launcher=$2; shift 2 ;;
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
[ -n "$nodes" ] || die "missing --nodes N" 2
[ -n "$tasks" ] || die "missing --ntasks-per-node K" 2
[ -n "$time_limit" ] || die "missing --time TIME (e.g. 04:00:00)" 2
is_count "$nodes" || die "--nodes '$nodes' is not a positive integer" 2
is_count "$tasks" || die "--ntasks-per-node '$tasks' is not a positive integer" 2
is_count "$warn" || die "--warn '$warn' is not a positive number of seconds" 2
[ "$warn" -le 65535 ] || die "--warn $warn: SLURM allows at most 65535 s" 2
[ -z "$max_segments" ] || is_count "$max_segments" || die "--max-segments '$max_segments' is not a positive integer" 2
case "$launcher" in srun|mpirun) ;; *) die "--launcher '$launcher': use srun or mpirun" 2 ;; esac
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
script_args+=(--warn "$warn" --launcher "$launcher" --bin "$bin_abs" "$config_abs")
[ "${#run_args[@]}" = 0 ] || script_args+=(-- "${run_args[@]}")

generate() {
  echo '#!/usr/bin/env bash'
  echo "#SBATCH --job-name=$name"
  echo "#SBATCH --nodes=$nodes"
  echo "#SBATCH --ntasks-per-node=$tasks"
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
  sed -n '/^# ==== body/,$p' "$template" | tail -n +2
}

if [ "$dry_run" = 1 ]; then
  generate
  echo "$prog: dry run: would write $output (logs in $logdir_abs)" >&2
  exit 0
fi
mkdir -p "$logdir_abs" || die "$logdir_abs: cannot create the log directory"
tmp="$output.tmp.$$"
generate > "$tmp" || { rm -f "$tmp"; die "$output: cannot write"; }
chmod +x "$tmp"
mv -f "$tmp" "$output"
echo "$prog: wrote $output${array_line:+ (array $array_line)}; logs go to $logdir_abs" >&2
if [ "$submit" = 1 ]; then
  job=$(sbatch --parsable "$output" 2>&1) || die "sbatch $output failed: ${job//$'\n'/ }"
  echo "$job"
else
  echo "sbatch $output"
fi
