#!/usr/bin/env bash
# A newcomer's walk over a floor of your own: everyone in POSTS signs up, posts into a public
# floor with a feed ("chat") and a blog, then the first person asks every question in QUESTIONS
# in a row, as one conversation (the same user_id, no conversation id).
#
#   POSTS:     who|chat or blog|created_at (ISO 8601)|text       one post a line
#   QUESTIONS: question|what a right answer holds (free text)    one turn a line
#
# Prints each turn: how it was read, the items found and the first one's score, the answer and
# the time it took. Whether an answer is right is yours to judge ("want" is printed beside it).
# Needs curl and jq; the server started as: MEMKIT_INSTANCE=$PWD/instance memkit serve
#   examples/walk.sh my-posts.txt my-questions.txt
#   examples/walk.sh sailing-bathroom-jlpt      # a walk that ships with memkit, by its name
# The shipped walks are package data in memkit/data/walks (NAME-posts.txt, NAME-questions.txt),
# the files eval/walks.py replays without a server.
set -euo pipefail
USAGE="usage: walk.sh POSTS QUESTIONS, or walk.sh NAME (one of $(dirname "$0")/../memkit/data/walks)"
if [ $# -eq 1 ]; then
  WALKS="$(dirname "$0")/../memkit/data/walks"
  POSTS="$WALKS/$1-posts.txt"; QUESTIONS="$WALKS/$1-questions.txt"
  [ -f "$POSTS" ] && [ -f "$QUESTIONS" ] || { echo "no walk $1 in $WALKS" >&2; exit 2; }
else
  POSTS=${1:?$USAGE}; QUESTIONS=${2:?$USAGE}
fi
source "$(dirname "$0")/lib.sh"  # B, J, OUT, signup
declare -A TOK
PEOPLE=$(cut -d'|' -f1 "$POSTS" | awk '!seen[$0]++')
ME=$(echo "$PEOPLE" | head -1); STAMP=$(date +%s)
for n in $PEOPLE; do TOK[$n]=$(signup $n "$(echo $n | tr A-Z a-z).$STAMP@example.com"); done
H() { echo "authorization: bearer ${TOK[$1]}"; }
FLOOR=$(curl -s -X POST $B/floors -H "$(H $ME)" -H "$J" -d '{"title": "Friends"}' | jq -r .floor_uid)
curl -s -X POST $B/floors/$FLOOR/public -H "$(H $ME)" >/dev/null
declare -A BLOCK
BLOCK[chat]=$(curl -s -X POST $B/floors/$FLOOR/blocks -H "$(H $ME)" -H "$J" -d '{"block_type": 1, "title": "Chat"}' | jq -r .block_id)
BLOCK[blog]=$(curl -s -X POST $B/floors/$FLOOR/blocks -H "$(H $ME)" -H "$J" -d '{"block_type": 2, "title": "Our blog"}' | jq -r .block_id)
while IFS='|' read -r who kind at text; do
  [ -z "$who" ] && continue
  curl -s -X POST $B/floors/$FLOOR/blocks/${BLOCK[$kind]}/events -H "$(H $who)" -H "$J" \
       -d "$(jq -n --arg t "$text" --arg at "$at" '{text: $t, created_at: $at}')" | jq -e .event_id >/dev/null
done < "$POSTS"
MY=$(curl -s $B/auth-service/profile -H "$(H $ME)" | jq -r .profile.user_id)
n=0
while IFS='|' read -r q want; do
  [ -z "$q" ] && continue
  n=$((n + 1))
  body=$(jq -n --arg u "$MY" --arg q "$q" --arg f "$FLOOR" '{user_id: $u, query: $q, floor_ids: [$f], k: 3, summary_needed: "1", include_metadata: "1"}')
  curl -s -o /tmp/walk-answer.$$ -w '%{time_total}' -X POST $B/agent/memory/query -H "$(H $ME)" -H "$J" -d "$body" > /tmp/walk-time.$$
  printf '[%d] %s   (want: %s)  %ss\n' $n "$q" "$want" "$(cat /tmp/walk-time.$$)"
  jq -r '"    [\(.metadata.carried.kind // "-")] items=\(.items | length) score=\(.items[0].score // 0)  \(.answer)"' /tmp/walk-answer.$$
done < "$QUESTIONS"
rm -f /tmp/walk-answer.$$ /tmp/walk-time.$$
