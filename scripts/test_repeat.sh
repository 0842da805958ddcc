#!/usr/bin/env bash
# Runs `.ci/run` N times, each in a fresh clone of this repository's HEAD (as CI does: nothing installed,
# no standard input), and prints pass/fail and wall time of each run, then any process of the suite's that
# outlived it (nats-server, valkey-server, `podherd` services, pytest: anything running from its clone).
#   scripts/test_repeat.sh N [quiet|noisy|nohup]...   one mode per run, cycling (default quiet)
# noisy: a CPU hog spins one core beside the run; nohup: started as `nohup ... &` (SIGINT ignored).
set -uo pipefail
top=$(git rev-parse --show-toplevel)
commit=$(git -C "$top" rev-parse HEAD)  # every run tests this commit, even if HEAD moves meanwhile
runs=${1:?usage: scripts/test_repeat.sh N [quiet|noisy|nohup]...}
shift
modes=("${@:-quiet}")
python=$(command -v python3.11 || command -v python3)
results=()
# A process of the run's: one whose command line, working directory or executable lies in the run's clone.
leftovers() {
  local pid
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    [ "$pid" = "$$" ] || [ "$pid" = "$BASHPID" ] && continue
    { tr '\0' ' ' </proc/"$pid"/cmdline; readlink /proc/"$pid"/cwd; readlink /proc/"$pid"/exe; } 2>/dev/null |
      grep -q -- "$1" && echo "$pid $(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null | cut -c1-120)"
  done
}
for ((i = 1; i <= runs; i++)); do
  mode=${modes[$(((i - 1) % ${#modes[@]}))]}
  dir=$(mktemp -d /tmp/podherd-repeat.XXXXXX)
  git clone -q "$top" "$dir/repo" && git -C "$dir/repo" checkout -q --detach "$commit"
  log="$dir/ci.log"
  hog=""
  [ "$mode" = noisy ] && { "$python" "$top/scripts/cpu_hog.py" 1800 & hog=$!; }
  start=$(date +%s)
  if [ "$mode" = nohup ]; then
    # A background job of a non-interactive shell starts with SIGINT ignored; nohup ignores SIGHUP too.
    (cd "$dir/repo" && nohup env CI=true bash .ci/run </dev/null >"$log" 2>&1 & wait $!)
  else
    (cd "$dir/repo" && CI=true bash .ci/run </dev/null >"$log" 2>&1)
  fi
  code=$?
  took=$(($(date +%s) - start))
  [ -n "$hog" ] && kill "$hog" 2>/dev/null
  pytest_line=$(grep -E '^=+ .*(passed|failed).* in ' "$log" | tail -1)
  left=$(leftovers "$dir")
  verdict=$([ "$code" = 0 ] && echo pass || echo FAIL)
  results+=("run $i  ${commit:0:7}  $mode  $verdict  wall ${took}s  ${pytest_line//=/}  log $log${left:+  LEFT RUNNING: $left}")
  echo "${results[-1]}"
done
printf '\n%s\n' "${results[@]}"
