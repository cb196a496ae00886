//! Objects that inflate past what is kept: never inflated or parsed on the host, nothing kept.

use super::*;

/// A loose tree object of `size` bytes (one entry with a huge name, zlib at level 9, a few
/// hundred KB on disk), written inside the sandbox by a script the test model runs. `new`
/// names it by its hash and commits it on the run's branch; `as-root` stores it under the
/// base's root tree's name instead (git never hashes an object it reads again), with the
/// run's pack removed so that name finds it.
fn inflating_tree(size: u64, mode: &str) -> String {
    format!(
        r#"python3 - {size} {mode} <<'PY'
import zlib, hashlib, os, sys, subprocess, glob
SIZE, MODE = int(sys.argv[1]), sys.argv[2]
git = lambda *a: subprocess.check_output(["git", *a]).strip().decode()
blob, root, base = git("rev-parse", "HEAD:README.md"), git("rev-parse", "HEAD^{{tree}}"), git("rev-parse", "HEAD")
tail = b"\0" + bytes.fromhex(blob)
hdr = b"tree %d\0" % SIZE
h = hashlib.sha1(); c = zlib.compressobj(9)
out = open(".git/objects/tmpbig", "wb")
def put(b):
    h.update(b); out.write(c.compress(b))
put(hdr); put(b"100644 ")
chunk = b"a" * (1 << 22); left = SIZE - 7 - len(tail)
while left > 0:
    n = min(left, len(chunk)); put(chunk[:n]); left -= n
put(tail); out.write(c.flush()); out.close()
oid = h.hexdigest() if MODE == "new" else root
if MODE == "as-root":
    for f in glob.glob(".git/objects/pack/*"): os.remove(f)
d = ".git/objects/" + oid[:2]
os.makedirs(d, exist_ok=True); os.replace(".git/objects/tmpbig", d + "/" + oid[2:])
print("tree", oid, os.path.getsize(d + "/" + oid[2:]), "bytes on disk")
if MODE == "new":
    body = "tree %s\nparent %s\nauthor a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n\nbig\n" % (oid, base)
    commit = subprocess.run(["git","hash-object","-t","commit","-w","--literally","--stdin"], input=body.encode(), capture_output=True).stdout.strip().decode()
    subprocess.check_call(["git","update-ref",git("symbolic-ref","HEAD"),commit]); print("commit", commit)
PY
ls -la .git/objects"#
    )
}

/// A run writes a correctly hashed loose tree that inflates to 200 MB (its file on disk is a
/// few hundred KB) and commits it; another stores such a tree under the base's own root
/// tree's name. No git on the host ever inflates either (a 2 GB one made one `diff-tree`
/// hold 7.8 GB): sizes are read from the objects' headers, a base object's name counts only
/// with the base's own size, and the run keeps nothing, saying why.
#[tokio::test(flavor = "multi_thread")]
async fn an_object_that_inflates_past_what_is_kept_is_never_parsed_on_the_host() {
    for mode in ["new", "as-root"] {
        let project = Project::new(true);
        let forge = inflating_tree(200_000_000, mode);
        let (run, events, seen) = attack(&project, PERMISSIVE, vec![shell(&forge)]).await;
        assert!(seen.contains("bytes on disk"), "{mode}: {seen}");
        let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
        assert_no_branch(&project, &branch);
        assert!(
            events.contains("more than the 16 MiB kept of one"),
            "{mode}: {events}"
        );
    }
}

/// A run writes nine loose files of 60 MiB each (one letter repeated: under the 64 MiB kept
/// of one file, a few hundred KB on disk together) and a small change. The sizes in the
/// objects' headers add up past what is kept of one run, so no git on the host inflates
/// them and nothing of the run is kept, saying why.
#[tokio::test(flavor = "multi_thread")]
async fn objects_that_together_inflate_past_what_is_kept_are_never_kept() {
    let project = Project::new(true);
    let forge = r#"python3 - <<'PY'
import zlib, hashlib, os
for letter in b"abcdefghi":
    size = 60 << 20
    h = hashlib.sha1(); c = zlib.compressobj(9)
    out = open(".git/objects/tmpbig", "wb")
    def put(b):
        h.update(b); out.write(c.compress(b))
    put(b"blob %d\0" % size)
    chunk = bytes([letter]) * (1 << 22)
    for _ in range(size // len(chunk)): put(chunk)
    out.write(c.flush()); out.close()
    oid = h.hexdigest(); d = ".git/objects/" + oid[:2]
    os.makedirs(d, exist_ok=True); os.replace(".git/objects/tmpbig", d + "/" + oid[2:])
    print("blob", oid, os.path.getsize(d + "/" + oid[2:]), "bytes on disk")
PY
echo kept > notes.txt"#;
    let (run, events, seen) = attack(&project, PERMISSIVE, vec![shell(forge)]).await;
    assert!(seen.contains("bytes on disk"), "{seen}");
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    assert_no_branch(&project, &branch);
    assert!(
        events.contains("more than the 512 MiB of objects kept of one run"),
        "{events}"
    );
}

/// A run writes a pack by hand: a 6-byte file stored as a delta on a 300 MiB blob of zeros
/// that the pack's index does not list (so no listing of the run's objects counts it), and
/// commits the file. Git on the host would have to inflate the hidden base whole to read
/// the file; it is never let allocate that much, so nothing of the run is kept.
#[tokio::test(flavor = "multi_thread")]
async fn a_delta_on_a_hidden_base_is_never_inflated_on_the_host() {
    let project = Project::new(true);
    let forge = r#"python3 - <<'PY'
import zlib, hashlib, struct, os
def entry_header(kind, size):
    out = bytearray(); byte = (kind << 4) | (size & 15); size >>= 4
    while size:
        out.append(byte | 0x80); byte = size & 0x7f; size >>= 7
    out.append(byte); return bytes(out)
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7f; n >>= 7
        if n: out.append(b | 0x80)
        else: out.append(b); return bytes(out)
def distance(n):
    out = [n & 0x7f]; n >>= 7
    while n:
        n -= 1; out.insert(0, 0x80 | (n & 0x7f)); n >>= 7
    return bytes(out)
big = 300 << 20
c = zlib.compressobj(9); chunk = bytes(1 << 22); hidden = bytearray()
for _ in range(big // len(chunk)): hidden += c.compress(chunk)
hidden += c.flush()
pack = bytearray(b"PACK" + struct.pack(">II", 2, 1))
base_at = len(pack)
pack += entry_header(3, big) + hidden
content = b"small\n"
delta = varint(big) + varint(len(content)) + bytes([len(content)]) + content
file_at = len(pack)
entry = entry_header(6, len(delta)) + distance(file_at - base_at) + zlib.compress(delta)
pack += entry
pack_sum = hashlib.sha1(pack).digest(); pack += pack_sum
oid = hashlib.sha1(b"blob %d\0" % len(content) + content).digest()
idx = bytearray(b"\377tOc" + struct.pack(">I", 2))
idx += b"".join(struct.pack(">I", 0 if i < oid[0] else 1) for i in range(256))
idx += oid + struct.pack(">I", zlib.crc32(entry)) + struct.pack(">I", file_at) + pack_sum
idx += hashlib.sha1(idx).digest()
name = ".git/objects/pack/pack-" + pack_sum.hex()
open(name + ".pack", "wb").write(pack); open(name + ".idx", "wb").write(idx)
print("hidden base", len(hidden), "bytes on disk; file", oid.hex())
PY
blob=$(printf 'small\n' | git hash-object --stdin)
git cat-file -s $blob
tree=$( (git ls-tree HEAD; printf '100644 blob %s\tsmall.txt\n' $blob) | git mktree)
c=$(git -c user.name=a -c user.email=a@b commit-tree $tree -p HEAD -m hidden)
git update-ref $(git symbolic-ref HEAD) $c && git log --oneline -1"#;
    let (run, events, seen) = attack(&project, PERMISSIVE, vec![shell(forge)]).await;
    assert!(seen.contains("hidden base"), "{seen}");
    // The run's own git read the file through the hidden base: the pack is well formed.
    assert!(seen.contains(" hidden"), "{seen}");
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    assert_no_branch(&project, &branch);
    // git's own words are the operator's; the run's readers get the sentence.
    assert!(
        events.contains("the run's changes could not be kept; the operator's log has the details"),
        "{events}"
    );
    assert!(!events.contains("pack-objects"), "{events}");
}

/// A run whose repository holds one object in two places (packed and loose, as `git repack`
/// without `-d` leaves it): which copy git reads would depend on the order it looks, so a
/// size read from one could be the other's. Nothing of the run is kept, saying why.
#[tokio::test(flavor = "multi_thread")]
async fn an_object_held_in_two_places_keeps_nothing() {
    let project = Project::new(true);
    let turns = vec![shell(
        "echo notes > notes.txt && git add notes.txt && git -c user.name=a -c user.email=b commit -qm notes && git repack -q -a && git count-objects -v",
    )];
    let (run, events, seen) = attack(&project, PERMISSIVE, turns).await;
    assert!(seen.contains("in-pack"), "{seen}");
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    assert_no_branch(&project, &branch);
    assert!(
        events.contains("holds an object in more than one place"),
        "{events}"
    );
}
