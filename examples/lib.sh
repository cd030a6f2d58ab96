# What examples/conversation.sh and examples/walk.sh share: the service's address, and
# signing someone up with the code the service wrote to its outbox (no SMTP server set).
B=${B:-http://127.0.0.1:8080}; J='Content-Type: application/json'
OUT=${MEMKIT_INSTANCE:?set MEMKIT_INSTANCE to the folder memkit serve was started with}/outbox
signup() {  # name email -> token
  curl -s -X POST $B/auth-service/signup -H "$J" -d '{"name": "'$1'", "email": "'$2'", "password": "correct horse battery"}' >/dev/null
  local code=$(grep -l "To: $2" $OUT/*.txt | xargs grep -ho 'code is [0-9]*' | tail -1 | cut -d' ' -f3)
  curl -s -X POST $B/auth-service/validate -H "$J" -d '{"email": "'$2'", "code": "'$code'", "password": "correct horse battery"}' | jq -r .token
}
