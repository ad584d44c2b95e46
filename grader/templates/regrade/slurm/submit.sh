#!/bin/bash
# Submit the class regrade to Slurm: the array of shards (regrade.sbatch), then the merge (merge.sbatch), which
# starts once every shard has ended, failed ones too (afterany), so that it names the students to re-run.
#
#   slurm/submit.sh CLASS [SHARDS]
#
# CLASS: the folder `gh classroom clone student-repos -a ASSIGNMENT_ID` wrote (<assignment>-submissions).
# SHARDS: the number of array tasks (default 20). Run it from the grading repository, with the venv that holds
# `grade` active: sbatch passes this shell's environment to the jobs, DEADLINE, ATTNLAB_SEED, PARTS, OUT,
# RELEASE and GRADE_OPTS included. Extra sbatch options (a partition, an account) go in SBATCH_OPTS.
set -euo pipefail

if [ "$#" -lt 1 ] || [ "$#" -gt 2 ]; then
  echo "usage: $0 CLASS [SHARDS]   (CLASS: the folder gh classroom clone student-repos wrote)" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CLASS="$(cd "$1" && pwd)"
SHARDS="${2:-${SHARDS:-20}}"
if ! [[ "$SHARDS" =~ ^[0-9]+$ ]] || [ "$SHARDS" -lt 1 ]; then
  echo "SHARDS is a whole number, at least 1, not '$SHARDS'" >&2
  exit 2
fi
LAB="${LAB:-$PWD}"
PARTS="${PARTS:-$LAB/regrade-parts}"
OUT="${OUT:-$LAB/regrade-out}"
export CLASS SHARDS LAB PARTS OUT
read -r -a extra <<< "${SBATCH_OPTS:-}"

array="$(sbatch --parsable "${extra[@]}" --array="1-$SHARDS" "$here/regrade.sbatch")"
array="${array%%;*}"  # --parsable prints "jobid" or "jobid;cluster"
merge="$(sbatch --parsable "${extra[@]}" --dependency="afterany:$array" "$here/merge.sbatch")"
merge="${merge%%;*}"
echo "shards: job $array (array 1-$SHARDS), parts in $PARTS"
echo "merge:  job $merge, after every shard; gradebook: $OUT/grades.csv"
echo "a failed shard K: sbatch --array=K $here/regrade.sbatch, then sbatch $here/merge.sbatch"
