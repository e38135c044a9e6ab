# Sourced by the scripts that compare two commits (bench-tenant-cost,
# bench-hello-ab): build_two_commits BEFORE AFTER PACKAGE... resolves the
# two commits into $before and $after, makes the temporary folder $tmp
# (removed at exit, with the worktrees), and builds PACKAGE's test binary at
# each, in a temporary worktree, as $tmp/before.test and $tmp/after.test.
# With more than one PACKAGE (a package that moved), each commit builds the
# first whose directory it has.
build_two_commits() {
  before=$(git rev-parse --verify "$1^{commit}")
  after=$(git rev-parse --verify "$2^{commit}")
  tmp=$(mktemp -d)
  trees=()
  trap cleanup_two_commits EXIT
  local side commit tree pkg
  for side in before after; do
    commit=${!side}
    tree=$tmp/$side-tree
    git worktree add --detach "$tree" "$commit" >/dev/null 2>&1
    trees+=("$tree")
    for pkg in "${@:3}"; do
      [[ -d $tree/$pkg ]] && break
    done
    echo "building $side (${commit:0:7}, $pkg)" >&2
    (cd "$tree" && go test -c -o "$tmp/$side.test" "$pkg")
  done
}

cleanup_two_commits() {
  local t
  for t in "${trees[@]}"; do git worktree remove --force "$t" >/dev/null 2>&1 || true; done
  rm -rf "$tmp"
}
