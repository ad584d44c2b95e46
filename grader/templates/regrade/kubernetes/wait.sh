#!/bin/bash
# Wait for a Job to end, complete or failed, and say which: `kubectl wait --for=condition=complete` alone waits
# out its whole timeout on a Job that has failed.
#
#   kubernetes/wait.sh attnlab-regrade 3h      # exit 0: complete; 1: failed (its failed indexes named); 124: timeout
set -euo pipefail
if [ "$#" -lt 1 ] || [ "$#" -gt 2 ]; then
  echo "usage: $0 JOB [TIMEOUT: seconds, or with s, m or h]" >&2
  exit 2
fi
job="$1"
limit="${2:-3h}"
case "$limit" in
  *h) seconds=$(( ${limit%h} * 3600 )) ;;
  *m) seconds=$(( ${limit%m} * 60 )) ;;
  *s) seconds=${limit%s} ;;
  *) seconds=$limit ;;
esac
every="${WAIT_EVERY:-15}"
end=$(( SECONDS + seconds ))
while :; do
  ended="$(kubectl get "job/$job" -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{" "}{end}')"
  case " $ended " in
    *" Complete "*) echo "job/$job complete"; exit 0 ;;
    *" Failed "*)
      failed="$(kubectl get "job/$job" -o jsonpath='{.status.failedIndexes}')"
      echo "job/$job failed${failed:+ (indexes $failed: shard = index + 1)}; see docs/regrade.md, Rerunning a failed shard" >&2
      exit 1 ;;
  esac
  if [ "$SECONDS" -ge "$end" ]; then
    echo "job/$job still running after $limit" >&2
    exit 124
  fi
  sleep "$every"
done
