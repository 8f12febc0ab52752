# shellcheck shell=bash
# Sourced by the shell scripts that write files: the rules of nsys_analysis/common/files.py (and of the
# programs' lib/core/output_file.h) for bash. An output path is followed through its symlinks to its
# target; a regular file or nothing there is written atomically (a staging file beside the target, not
# beside the link, fsynced and renamed over it); a character device such as /dev/null is written in place;
# anything else (a directory, a FIFO, a socket, a block device) is refused, never replaced. Staging files
# are made by mktemp, under a hidden unique name, so nothing already there is in their way.

# output_problem PATH: prints why an output file cannot be written at PATH and returns 1; prints nothing
# and returns 0 when it can (its missing directories are made later by the caller's mkdir -p).
output_problem() {
  local path=$1 target dir
  [[ -n $path ]] || { echo "an empty path"; return 1; }
  if [[ -e $path ]]; then
    [[ -f $path || -c $path ]] && return 0
    if [[ -d $path ]]; then echo "is a directory, expected a file (it is never replaced)"
    elif [[ -p $path ]]; then echo "is a FIFO, expected a regular file or a character device such as /dev/null (it is never replaced)"
    elif [[ -S $path ]]; then echo "is a socket, expected a regular file (it is never replaced)"
    else echo "is not a regular file (it is never replaced)"
    fi
    return 1
  fi
  target=$(readlink -m -- "$path")
  # readlink -m leaves a symlink loop unresolved: what it prints is still a link.
  [[ -L $target ]] && { echo "a symlink loop"; return 1; }
  dir=$(dirname -- "$target")
  while [[ ! -e $dir && ! -L $dir ]]; do dir=$(dirname -- "$dir"); done
  [[ -d $dir ]] || { echo "$dir is not a directory"; return 1; }
  return 0
}

# write_file PATH: writes stdin to the output at PATH by the rules above. Returns 1 with a message on
# stderr (naming PATH) when PATH is refused or the write fails; the target is then as it was.
write_file() {
  local path=$1 problem target dir tmp mode
  if [[ -c $path ]]; then
    cat >"$path"
    return
  fi
  problem=$(output_problem "$path") || { echo "cannot write $path: $problem" >&2; return 1; }
  target=$(readlink -m -- "$path")
  dir=$(dirname -- "$target")
  tmp=$(mktemp -- "$dir/.${target##*/}.XXXXXXXX.tmp") || { echo "cannot write $path: no staging file in $dir" >&2; return 1; }
  if [[ -f $target ]]; then mode=$(stat -c %a -- "$target"); else mode=$(printf '%o' $((0666 & ~$(umask)))); fi
  if cat >"$tmp" && chmod "$mode" -- "$tmp" && { sync -- "$tmp" 2>/dev/null || true; } && mv -f -- "$tmp" "$target"; then
    return 0
  fi
  rm -f -- "$tmp"
  echo "cannot write $path" >&2
  return 1
}

# remove_stale PATH...: removes each regular file at PATH, or at its symlink's target (the link stays), so
# that an output a run fails to make shows as missing, not as an earlier run's; leaves a device or a FIFO
# as it is.
remove_stale() {
  local path
  for path in "$@"; do
    [[ -f $path ]] && rm -f -- "$(readlink -f -- "$path")"
  done
  return 0
}
