# Sourced by build.sh and cache-safety-test.sh: `path_without_zkd` prints $PATH without the
# folders that hold a zkd, so that ZkdBinary.find() comes to the jar's bundled binary.
path_without_zkd() {
    local kept=() dirs dir
    IFS=: read -r -a dirs <<<"$PATH"
    for dir in "${dirs[@]}"; do
        [ -n "$dir" ] && [ ! -e "$dir/zkd" ] && kept+=("$dir")
    done
    (IFS=:; echo "${kept[*]}")
}
