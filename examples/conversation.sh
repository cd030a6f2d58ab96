#!/usr/bin/env bash
# A first conversation (docs/SERVICE.md): Ann, Mia and Tom post 30 dated posts into a
# public floor of Ann's, then Ann asks 13 questions in a row; a new user, Cy, asks a bare follow-up.
# Needs curl and jq; the server started as: MEMKIT_INSTANCE=$PWD/instance memkit serve
set -euo pipefail
source "$(dirname "$0")/lib.sh"  # B, J, OUT, signup
declare -A TOK
for n in Ann Mia Tom Cy; do TOK[$n]=$(signup $n "$(echo $n | tr A-Z a-z)@example.com"); done
H() { echo "authorization: bearer ${TOK[$1]}"; }
FLOOR=$(curl -s -X POST $B/floors -H "$(H Ann)" -H "$J" -d '{"title": "Friends"}' | jq -r .floor_uid)
curl -s -X POST $B/floors/$FLOOR/public -H "$(H Ann)" >/dev/null
BLOCK=$(curl -s -X POST $B/floors/$FLOOR/blocks -H "$(H Ann)" -H "$J" -d '{"block_type": 1, "title": "Group chat"}' | jq -r .block_id)
while IFS='|' read -r who at text; do
  curl -s -X POST $B/floors/$FLOOR/blocks/$BLOCK/events -H "$(H $who)" -H "$J" \
       -d "$(jq -n --arg t "$text" --arg at "$at" '{text: $t, created_at: $at}')" | jq -r .event_id >/dev/null
done < "$(dirname "$0")/posts.txt"
uid() { curl -s $B/auth-service/profile -H "$(H $1)" | jq -r .profile.user_id; }
ANN=$(uid Ann); CY=$(uid Cy)
ask() { # who uid question
  curl -s -X POST $B/agent/memory/query -H "$(H $1)" -H "$J" \
     -d "$(jq -n --arg u "$2" --arg q "$3" --arg f "$FLOOR" '{user_id: $u, query: $q, floor_ids: [$f], k: 3, summary_needed: "1", include_metadata: "1"}')" \
     | jq -c '{q: .query, read: .metadata.carried.kind, carried: .metadata.carried.words, window: (.metadata.carried.window.text // .metadata.carried.window.from), answer, first: (.items[0].text // null), score: (.items[0].score // null)}'
}
for q in "Who organised the Zion trip?" "how much was the cabin?" "when did they drive there?" "what about the puppy?" \
         "what did he chew?" "when was that?" "What happened in April?" "who got the Coldplay tickets?" \
         "and how did they get home?" "How much did the boiler repair cost?" "What is the name of Tom's sister?" \
         "anything from Mia two weeks ago?" "what did Tom post last month?"; do
  ask Ann "$ANN" "$q"; done
echo "--- a new user, a bare follow-up:"; ask Cy "$CY" "and when was that?"
