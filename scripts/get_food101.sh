#!/usr/bin/env bash
# Fetches the real Food-101 (the archive torchvision.datasets.Food101 downloads), checks its MD5 and
# extracts it to DIR/food-101, the layout `train_resnet50 --data DIR` reads.
#
# usage: scripts/get_food101.sh [--out DIR] [--url URL] [--md5 SUM] [--replace]
#
#   --out DIR   where the archive and the tree go (default: data): DIR/food-101.tar.gz, DIR/food-101/
#   --url URL   the archive (default: torchvision's, about 5 GB:
#               http://data.vision.ee.ethz.ch/cvl/food-101.tar.gz); curl also takes file:// URLs
#               (of a regular file)
#   --md5 SUM   the archive's MD5 (default: torchvision's, 85eeb15f3717b99a5da872d97d918f87)
#   --replace   delete a DIR/food-101 that this script did not make (no marker) for the new tree
#   -h, --help  this text
#
# The download goes to DIR/food-101.tar.gz.part with curl (wget when there is no curl); a run that
# is interrupted leaves it there and the next run resumes it (one that cannot write it, on a full disk
# or a read-only DIR, says so and what it kept). A .part the server cannot resume (curl exit 36: it
# is larger than the archive; exit 33: the server takes no byte ranges) is deleted and the download
# starts over. A connection that does not open within 30 s, or a transfer under 1024 bytes/s for
# 60 s, fails (curl retries it 3 times first) rather than hanging. Complete, the .part becomes
# DIR/food-101.tar.gz, whose MD5 is checked before anything is extracted. The archive is extracted
# in a temporary directory inside DIR, its layout checked (food-101/meta/classes.txt, train.txt,
# test.txt and food-101/images/), the marker food-101/.complete (holding the MD5) written last, and
# the tree renamed to DIR/food-101 in one step. With that marker, a run does nothing and writes
# nothing (DIR may be read-only); a tree with the marker of another MD5, or lacking part of the
# layout, is this script's and is replaced once the new one is ready. A DIR/food-101 without the
# marker (made by hand, or by another tool) may hold files of yours: it is a usage error, before
# anything is downloaded, unless it is an empty directory or --replace is given. The archive is
# kept: delete it to save the space.
#
# Symlinks are followed: a DIR/food-101.tar.gz or DIR/food-101 that is a link has its target written
# (the .part file, the staging and old trees beside the target, not beside the link; the link stays).
# Nothing is deleted through a link, though: a DIR/food-101 link to anything but an empty directory
# or this script's tree is a usage error, --replace included.
# What is neither a regular file nor a directory there (a FIFO, a device) is never replaced: the
# archive's or the tree's path holding one is a usage error. A .part that is a device is written in place
# (curl's errors say so), but never renamed into the archive.
#
# Exit status: 0 when DIR/food-101 is complete (fetched now, or already there); 1 when the download,
# the MD5 check, the extraction, the layout check or the marker's write fails, or a tool is missing
# (curl or wget, md5sum, tar, gzip); 2 for usage errors (flags; a file:// URL that is not a regular
# file; an archive or tree path holding what is never replaced; a DIR/food-101 without the marker,
# as above); 130 or 143 when interrupted (SIGINT, SIGTERM), at once, the download or extraction
# stopped.
set -euo pipefail

readonly NAME=get_food101.sh
# torchvision.datasets.Food101's _URL and _MD5.
readonly DEFAULT_URL=http://data.vision.ee.ethz.ch/cvl/food-101.tar.gz
readonly DEFAULT_MD5=85eeb15f3717b99a5da872d97d918f87
# A download that makes no progress fails rather than hanging: no connection within this many seconds,
# or under LOW_SPEED_BPS for LOW_SPEED_S seconds (a server that accepts and never answers).
readonly CONNECT_TIMEOUT_S=30 LOW_SPEED_BPS=1024 LOW_SPEED_S=60

usage() { sed -n '5,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; }
die_usage() {
  echo "$NAME: error: $1" >&2
  echo "usage: scripts/get_food101.sh [--out DIR] [--url URL] [--md5 SUM] [--replace]   (--help for more)" >&2
  exit 2
}
die() { echo "$NAME: error: $1" >&2; exit 1; }
say() { echo "$NAME: $1"; }

out=data
url=$DEFAULT_URL
md5=$DEFAULT_MD5
replace=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --replace) replace=1; shift; continue ;;
    --replace=*) die_usage "--replace: takes no value, got '${1#*=}'" ;;
    --out|--url|--md5)
      flag=$1
      [ $# -ge 2 ] || die_usage "$flag: expected a value"
      value=$2
      # `--out --md5 X` is a forgotten value, not a directory named --md5.
      [[ $value != --* ]] || die_usage "$flag: expected a value, got the flag '$value'"
      shift 2 ;;
    --out=*|--url=*|--md5=*)
      flag=${1%%=*}
      value=${1#*=}
      shift ;;
    *) die_usage "unknown argument '$1'" ;;
  esac
  [ -n "$value" ] || die_usage "$flag: expected a value, got ''"
  case "$flag" in
    --out) out=$value ;;
    --url) url=$value ;;
    --md5) md5=${value,,} ;;
  esac
done
[[ $md5 =~ ^[0-9a-f]{32}$ ]] || die_usage "--md5: expected 32 hex digits, got '$md5'"

if command -v curl >/dev/null 2>&1; then
  fetcher=curl
elif command -v wget >/dev/null 2>&1; then
  fetcher=wget
  [[ $url != file://* ]] || die "wget cannot fetch file:// URLs ($url): install curl"
else
  die "neither curl nor wget is installed (apt install curl)"
fi
for tool in md5sum tar gzip; do
  command -v "$tool" >/dev/null 2>&1 ||
    die "$tool is not installed (apt install $([ "$tool" = md5sum ] && echo coreutils || echo "$tool"))"
done

mkdir -p -- "$out" || die "--out: cannot create the directory '$out'"
archive=$out/food-101.tar.gz
tree=$out/food-101
marker=$tree/.complete
# A symlink at either path is followed: what is written is its target, and everything staged goes beside it.
archive_target=$archive
[ ! -L "$archive" ] || archive_target=$(readlink -m -- "$archive")
tree_target=$tree
[ ! -L "$tree" ] || tree_target=$(readlink -m -- "$tree")
tree_dir=$(dirname -- "$tree_target")
part=$archive_target.part
stage=""
old=""
child=""  # the download or extraction running (run_child)

cleanup() {
  # A signal stops the download or extraction at once; the lock is released once it has ended.
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  if [ -n "$stage" ]; then rm -rf -- "$stage"; fi
  if [ -n "$old" ]; then rm -rf -- "$old"; fi
}
trap cleanup EXIT
# Exit (and so clean up) on a signal; the .part file stays for the next run to resume.
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs "$@" in the background and waits for it: bash runs a trap only once the command in the
# foreground has ended, but at once during `wait`, so that a signal ends a download that hangs.
run_child() {
  local rc=0
  "$@" &
  child=$!
  wait "$child" || rc=$?
  child=""
  return "$rc"
}

# $1 as one shell word, quoted when it needs to be (for the commands this script prints).
shell_word() {
  if [[ $1 =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
    printf '%s' "$1"
  else
    printf "'%s'" "${1//\'/\'\\\'\'}"
  fi
}

# Prints what DIR (a food-101 tree) lacks of the layout train_resnet50 reads, one entry a line.
layout_missing() {
  local f
  for f in meta/classes.txt meta/train.txt meta/test.txt; do
    [ -s "$1/$f" ] || echo "food-101/$f"
  done
  [ -d "$1/images" ] || echo "food-101/images/"
}

# True when $1 is a directory with nothing in it (one that cannot be read is not).
empty_dir() {
  [ -d "$1" ] && [ -r "$1" ] && [ -x "$1" ] || return 1
  local entries
  entries=$(shopt -s nullglob dotglob; e=("$1"/*); echo "${#e[@]}")
  [ "$entries" -eq 0 ]
}

# Prints why DIR/food-101 may not be replaced, if it may not: something without the marker, which may
# hold the user's files, unless an empty directory, or with --replace, what is not behind a link.
tree_refusal() {
  if [ ! -e "$tree" ] || [ -f "$marker" ] || empty_dir "$tree"; then return 0; fi
  if [ -L "$tree" ]; then
    echo "$tree is a symlink to $tree_target, which exists without the completion marker $marker:" \
      "nothing is deleted through a link, --replace included; move $tree_target away, or point the link elsewhere"
  elif [ "$replace" -eq 0 ]; then
    echo "$tree exists without the completion marker $marker: get_food101.sh did not make it, and it" \
      "may hold files of yours; move it away, choose another --out, or give --replace to delete it" \
      "once the new tree is ready"
  fi
}

# Checked before the lock is taken, so that a complete tree in a read-only DIR needs no write. The tree
# appears under its name in one rename: a run replacing it never shows a half one here.
if [ -f "$marker" ]; then
  done_md5=$(<"$marker")
  done_md5=${done_md5//[[:space:]]/}
  mapfile -t missing < <(layout_missing "$tree")
  if [ "$done_md5" = "$md5" ] && [ ${#missing[@]} -eq 0 ]; then
    say "$tree is already complete (marker $marker, md5 $md5): nothing to do"
    exit 0
  elif [ "$done_md5" != "$md5" ]; then
    say "$tree was extracted from another archive (md5 $done_md5 in $marker, expected $md5): it will be replaced once the archive is verified and extracted"
  else
    say "$tree has its marker but lacks ${missing[*]}: it will be replaced once the archive is verified and extracted"
  fi
fi

# Only a regular file (or nothing) is ever renamed over, or moved aside: anything else there is refused.
for path in "$archive" "$tree"; do
  if [ -e "$path" ] && [ ! -f "$path" ] && [ ! -d "$path" ]; then
    kind="not a regular file or a directory"
    [ -p "$path" ] && kind="a FIFO"
    [ -c "$path" ] && kind="a character device"
    die_usage "$path is $kind: expected the Food-101 archive or tree, or nothing (it is never replaced)"
  fi
done
[ ! -d "$archive" ] || die_usage "$archive is a directory, expected the Food-101 archive or nothing"
# Before anything is downloaded: a tree without the marker is the user's until --replace says not.
if [ ! -f "$marker" ] && [ -e "$tree" ]; then
  why=$(tree_refusal)
  [ -z "$why" ] || die_usage "$why"
  if empty_dir "$tree"; then
    say "$tree is an empty directory: the new tree will take its place"
  else
    say "$tree exists without the completion marker $marker: --replace: it will be deleted once the archive is verified and extracted"
  fi
fi

# One run at a time per DIR: two curls appending to one .part would corrupt it. With the lock held,
# staging directories left by a killed run are ours to remove.
if command -v flock >/dev/null 2>&1; then
  lock=$out/.get_food101.lock
  # A FIFO would block the open below; appending never truncates what a symlink points to.
  [ ! -e "$lock" ] || [ -f "$lock" ] ||
    die "cannot create the lock file $lock: $( [ -d "$lock" ] && echo "it is a directory" || echo "it is not a regular file")"
  { exec 9>>"$lock"; } 2>/dev/null || {
    [ -w "$out" ] && die "cannot create the lock file $lock (is it a directory?)"
    die "cannot write in $out (creating the lock file $lock failed): choose another --out, or make it writable"
  }
  flock -n 9 || die "another get_food101.sh is working in $out (lock: $lock)"
  rm -rf -- "$out"/.food-101.extract.* "$out"/.food-101.old.* "$tree_dir"/.food-101.extract.* "$tree_dir"/.food-101.old.*
fi

# Downloads $1 to $2, resuming what $2 already holds.
download() {
  local progress
  if [ "$fetcher" = curl ]; then
    progress=(-sS)
    if [ -t 2 ]; then progress=(--progress-bar); fi
    run_child curl -fL --retry 3 --retry-delay 2 --connect-timeout "$CONNECT_TIMEOUT_S" \
      --speed-limit "$LOW_SPEED_BPS" --speed-time "$LOW_SPEED_S" -C - "${progress[@]}" -o "$2" -- "$1"
  else
    progress=(-nv)
    if [ -t 2 ]; then progress=(--progress=bar); fi
    run_child wget -c --tries=3 --connect-timeout="$CONNECT_TIMEOUT_S" --read-timeout="$LOW_SPEED_S" \
      "${progress[@]}" -O "$2" -- "$1"
  fi
}

# download_failed STATUS: exits with what the failed download left in $part and what a next run can do.
download_failed() {
  local kept=0 why
  if [ -f "$part" ]; then kept=$(wc -c <"$part"); fi
  kept=$((kept))
  # curl's 23 and wget's 3: the output could not be written, which a later run cannot resume past.
  if { [ "$fetcher" = curl ] && (($1 == 23)); } || { [ "$fetcher" = wget ] && (($1 == 3)); }; then
    why="cannot write $part ($fetcher exit $1: a full disk, a read-only $out, or not a regular file?)"
    ((kept > 0)) &&
      die "$why: it keeps the $kept bytes that arrived, which a run resumes once $part can be written again"
    die "$why: nothing was downloaded; fix that and run again"
  fi
  why="the download of $url failed ($fetcher exit $1)"
  if [ "$fetcher" = curl ] && (($1 == 28)); then
    why="the download of $url stalled (curl exit 28: no connection within $CONNECT_TIMEOUT_S s, or under $LOW_SPEED_BPS bytes/s for $LOW_SPEED_S s, 3 retries included)"
  fi
  ((kept > 0)) &&
    die "$why; $part keeps the $kept bytes that arrived and the next run resumes it (delete it to start over)"
  die "$why; nothing arrived (run again to retry)"
}

if [ -f "$archive" ]; then
  say "using the archive already downloaded: $archive"
else
  if [ -s "$part" ]; then
    say "resuming $part at $(wc -c <"$part") bytes from $url ($fetcher)"
  else
    say "downloading $url to $part ($fetcher)"
  fi
  # curl would wait forever on a FIFO's open, and a directory is no archive.
  if [[ ${url,,} == file://* ]]; then
    path=${url#*://}
    [[ $path == /* ]] || path=/${path#*/}  # file://localhost/...
    [[ $path != *%* ]] || path=$(printf '%b' "${path//%/\\x}")  # %20 and the like, as curl reads them
    if [ -e "$path" ] && [ ! -f "$path" ]; then
      die_usage "--url: $path is not a regular file (curl would block on a FIFO; a directory is no archive)"
    fi
  fi
  status=0
  download "$url" "$part" || status=$?
  # A .part that cannot be resumed would fail every run: its bytes are of no use, so start over.
  if [ "$fetcher" = curl ] && { ((status == 36)) || ((status == 33)); } && [ -f "$part" ]; then
    why="it is larger than the archive, or not a part of it?"
    ((status == 36)) || why="the server does not send byte ranges"
    say "$part ($(($(wc -c <"$part"))) bytes) cannot be resumed from $url (curl exit $status: $why): deleting it and downloading it from the start"
    rm -f -- "$part"
    status=0
    download "$url" "$part" || status=$?
  fi
  ((status == 0)) || download_failed "$status"
  # A .part that is a device (written in place) never becomes the archive.
  [ -f "$part" ] || die "$part is not a regular file: the download cannot become $archive (remove it and run again)"
  mv -f -- "$(readlink -f -- "$part")" "$archive_target"
  [ ! -L "$part" ] || rm -f -- "$part"
fi

say "checking the MD5 of $archive"
found=$(md5sum <"$archive")
found=${found%% *}
[ "$found" = "$md5" ] ||
  die "MD5 mismatch for $archive: expected $md5, found $found (a corrupt or different file: delete it to download again, or give the right --md5)"

stage=$(mktemp -d "$tree_dir/.food-101.extract.XXXXXX") ||
  die "cannot create a temporary directory in $tree_dir"
say "extracting $archive"
run_child tar --no-same-owner -xzf "$archive" -C "$stage" ||
  die "cannot extract $archive: tar failed (a truncated or corrupt archive, or a full disk?); nothing was installed in $tree"
mapfile -t missing < <(layout_missing "$stage/food-101")
[ ${#missing[@]} -eq 0 ] ||
  die "$archive is not the Food-101 layout train_resnet50 --data reads: it lacks ${missing[*]}; nothing was installed in $tree"

# The marker goes in last, then the whole tree appears under its name in one rename(2): a
# DIR/food-101 is either complete with its marker, or has none.
# One the archive holds is replaced, not written through (a link there could point anywhere).
rm -f -- "$stage/food-101/.complete" 2>/dev/null || true
{ printf '%s\n' "$md5" >"$stage/food-101/.complete"; } 2>/dev/null ||
  die "cannot write the completion marker of $tree ($stage/food-101/.complete: a full disk?); nothing was installed in $tree, and $archive, verified, is kept"
# What is there now may have changed since the check above (the lock is not taken before it).
why=$(tree_refusal)
[ -z "$why" ] || die_usage "$why"
if [ -e "$tree_target" ] || [ -L "$tree_target" ]; then
  old=$(mktemp -d "$tree_dir/.food-101.old.XXXXXX")
  mv -- "$tree_target" "$old/"
fi
mv -- "$stage/food-101" "$tree_target"

classes=$(wc -l <"$tree/meta/classes.txt")
train=$(wc -l <"$tree/meta/train.txt")
tests=$(wc -l <"$tree/meta/test.txt")
say "done: $tree ($((classes)) classes, $((train)) train and $((tests)) test images); train on it with"
say "  scripts/run.sh --data $(shell_word "$out")    or    build/bin/train_resnet50 --data $(shell_word "$out")"
