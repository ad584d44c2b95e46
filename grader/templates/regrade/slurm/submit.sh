#!/bin/bash
# Submit the class regrade to Slurm: the array of shards (regrade.sbatch), then the merge (merge.sbatch), which
# starts once every shard has ended, failed ones too (afterany), so that it names the students to re-run.
#
#   ORG=school PREFIX=fall26-attention-lab- ROSTER=roster.csv slurm/submit.sh CLASS [SHARDS]
#
# CLASS: the folder of the students' repositories. With ORG set, submit.sh first clones the class into it here
# (on the login node, which reaches GitHub: `grade batch collect CLASS --org ORG --prefix PREFIX --roster ROSTER`,
# with gh logged in, or GH_TOKEN set); a rerun clones only what is missing. Without ORG, CLASS is a folder you
# made (`gh teacher download`'s, or `grade batch collect`'s). ROSTER: Classroom 50's roster.csv or one GitHub
# username a line; with it every student on it gets a row, and PREFIX names their repositories (PREFIX+username).
# SHARDS: the number of array tasks (default 20). Run it from the grading repository, with the venv that holds
# `grade` active: sbatch passes this shell's environment to the jobs, DEADLINE, ATTNLAB_SEED, PARTS, OUT,
# ROSTER, PREFIX, RELEASE and GRADE_OPTS included. Extra sbatch options (a partition, an account) go in SBATCH_OPTS.
set -euo pipefail

if [ "$#" -lt 1 ] || [ "$#" -gt 2 ]; then
  echo "usage: [ORG=... PREFIX=... ROSTER=...] $0 CLASS [SHARDS]   (CLASS: the folder of the students' repositories)" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SHARDS="${2:-${SHARDS:-20}}"
if ! [[ "$SHARDS" =~ ^[0-9]+$ ]] || [ "$SHARDS" -lt 1 ]; then
  echo "SHARDS is a whole number, at least 1, not '$SHARDS'" >&2
  exit 2
fi
ORG="${ORG:-}"
PREFIX="${PREFIX:-}"
ROSTER="${ROSTER:-}"
if [ -n "$ROSTER" ]; then
  if [ ! -f "$ROSTER" ]; then
    echo "ROSTER=$ROSTER is not a file: Classroom 50's roster.csv, or one GitHub username a line" >&2
    exit 2
  fi
  ROSTER="$(cd "$(dirname "$ROSTER")" && pwd)/$(basename "$ROSTER")"  # the tasks run elsewhere: an absolute path
  if [ -z "$PREFIX" ]; then
    echo "ROSTER needs PREFIX: student U's repository is PREFIX+U, e.g. PREFIX=fall26-attention-lab-" >&2
    exit 2
  fi
fi
if [ -n "$ORG" ]; then
  collect=("$1" --org "$ORG" --prefix "$PREFIX")
  if [ -n "$ROSTER" ]; then
    collect+=(--roster "$ROSTER")
  fi
  grade batch collect "${collect[@]}"  # a failed clone stops here, naming it; a student without a repository does not
fi
CLASS="$(cd "$1" && pwd)"
LAB="${LAB:-$PWD}"
PARTS="${PARTS:-$LAB/regrade-parts}"
OUT="${OUT:-$LAB/regrade-out}"
export CLASS SHARDS LAB PARTS OUT ROSTER PREFIX
read -r -a extra <<< "${SBATCH_OPTS:-}"

array="$(sbatch --parsable "${extra[@]}" --array="1-$SHARDS" "$here/regrade.sbatch")"
array="${array%%;*}"  # --parsable prints "jobid" or "jobid;cluster"
merge="$(sbatch --parsable "${extra[@]}" --dependency="afterany:$array" "$here/merge.sbatch")"
merge="${merge%%;*}"
echo "shards: job $array (array 1-$SHARDS), parts in $PARTS"
echo "merge:  job $merge, after every shard; gradebook: $OUT/grades.csv, $OUT/scores.csv"
# The rerun of a failed shard, runnable as printed from any shell: this run's settings (sbatch passes the
# environment to the job), never the defaults; the hidden seed by name only, so it is not in a terminal's log.
same=""
for name in CLASS SHARDS LAB PARTS OUT ROSTER PREFIX DEADLINE RELEASE GRADE_OPTS; do
  if [ -n "${!name:-}" ]; then
    same+="$name=$(printf '%q' "${!name}") "
  fi
done
if [ -n "${ATTNLAB_SEED:-}" ]; then
  same+='ATTNLAB_SEED="$ATTNLAB_SEED" '
  seed=" (export ATTNLAB_SEED as it is now first)"
else
  seed=""
fi
opts="${SBATCH_OPTS:+$SBATCH_OPTS }"
echo "rerun a failed shard K$seed:"
echo "  ${same}sbatch ${opts}--array=K $here/regrade.sbatch"
echo "then merge again:"
echo "  ${same}sbatch ${opts}$here/merge.sbatch"
