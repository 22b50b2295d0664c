# Sourced by study_all.sh and study_quiet.sh: step OUTPUT COMMAND... runs COMMAND into $R/OUTPUT
# and timestamps its start and end (with its exit status) in $LOG.
step() {
  local out=$1; shift
  echo "$(date -u +%FT%TZ) start $out" >> "$LOG"
  "$@" > "$R/$out" 2>&1
  echo "$(date -u +%FT%TZ) end $out rc=$?" >> "$LOG"
}
