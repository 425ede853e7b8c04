# SPDX-License-Identifier: Apache-2.0
# Sourced by tools/device-check.sh and tools/device-quick.sh. The device tool brings back at most 8
# files from $OUT, so on exit every file of $OUTDIR but those named goes into one tarball:
#   pack_out TARBALL KEPT...   (nothing happens outside the device tool, where $OUT is unset)
pack_out() {
  [ -n "${OUT:-}" ] || return 0
  local tarball=$1 f rest=()
  shift
  local keep=" $* $tarball "
  for f in "$OUTDIR"/*; do
    [ -e "$f" ] || continue
    case "$keep" in *" $(basename "$f") "*) ;; *) rest+=("$(basename "$f")") ;; esac
  done
  if [ ${#rest[@]} -gt 0 ]; then
    tar -czf "$OUTDIR/$tarball" -C "$OUTDIR" "${rest[@]}" && (cd "$OUTDIR" && rm -rf "${rest[@]}")
  fi
}
