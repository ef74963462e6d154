#!/bin/bash
# The 1.x trainer's poll measured with wrk, a load generator not ours: creates 64
# rollouts on the server at URL, then runs `wrk -t2 -c16 -d3s` GETs cycling
# over them and prints wrk's requests/s. Works against lightning-store and
# against agentlightning 1.0.2's own server (started without a key).
#   benches/agl1_get_wrk.sh http://127.0.0.1:PORT [label]
set -euo pipefail
url=$1
label=${2:-$url}
run=$(date +%s%N)
ids=()
for i in $(seq 0 63); do ids+=("wrk-$run-$i"); done
body=$(printf '{"rollout_id":"%s","input":{"data_id":"%s"}},' $(for id in "${ids[@]}"; do echo "$id $id"; done))
curl -sf -o /dev/null -H 'content-type: application/json' -d "[${body%,}]" "$url/api/rollouts"
script=$(mktemp --suffix .lua)
trap 'rm -f "$script"' EXIT
cat > "$script" <<LUA
ids = {}
for id in string.gmatch("${ids[*]}", "%S+") do table.insert(ids, id) end
n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/api/rollouts/" .. ids[(n % #ids) + 1])
end
LUA
echo "$label: $(wrk -t2 -c16 -d3s -s "$script" "$url" | grep -E 'Requests/sec|Non-2xx' | tr -s ' ' | tr '\n' ' ')"
