//! Every fuzz target's committed corpus (`fuzz/corpus/<target>/`), replayed on stable as an
//! ordinary test: each input once through its target's body, which may refuse it but never
//! panic. A crash the fuzzer finds is added to the corpus, so it stays a regression test here.
//! The list of targets, the files under `fuzz/fuzz_targets/` and the corpus directories are
//! the same set, or this test fails. A fixed number of seeded mutations of every input (bits
//! flipped, bytes inserted, cut, spliced with another input) go through the same bodies: the
//! budgeted fuzzing every CI run does on stable (coverage-blind; `scripts/fuzz.sh` runs the
//! coverage-guided libFuzzer on nightly).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use server::fuzzing::{SeededRng, mutate};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn names_in(dir: &Path, strip: &str) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(strip).map(str::to_owned))
        .collect()
}

#[test]
fn every_target_has_its_fuzz_file_and_a_corpus() {
    let targets: BTreeSet<String> = server::fuzzing::TARGETS
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .collect();
    assert_eq!(names_in(&fuzz_dir().join("fuzz_targets"), ".rs"), targets);
    assert_eq!(names_in(&fuzz_dir().join("corpus"), ""), targets);
}

#[test]
fn every_corpus_input_is_read_without_a_panic() {
    let mut replayed = 0;
    for (name, body) in server::fuzzing::TARGETS {
        let dir = fuzz_dir().join("corpus").join(name);
        let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        inputs.sort();
        assert!(!inputs.is_empty(), "{name}: an empty corpus");
        for input in inputs {
            let bytes = std::fs::read(&input).unwrap();
            let outcome = std::panic::catch_unwind(|| body(&bytes));
            assert!(outcome.is_ok(), "{name}: {} panicked", input.display());
            replayed += 1;
        }
    }
    println!("replayed {replayed} inputs");
}

/// Mutations of each corpus input per target run.
const MUTATIONS_PER_INPUT: usize = 400;

#[test]
fn seeded_mutations_of_every_corpus_input_are_read_without_a_panic() {
    let mut rng = SeededRng(0x5eed_f022);
    let mut ran = 0;
    for (name, body) in server::fuzzing::TARGETS {
        let dir = fuzz_dir().join("corpus").join(name);
        let mut inputs: Vec<Vec<u8>> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| std::fs::read(e.unwrap().path()).unwrap())
            .collect();
        inputs.sort();
        for (i, input) in inputs.iter().enumerate() {
            let other = &inputs[(i + 1) % inputs.len()];
            for _ in 0..MUTATIONS_PER_INPUT {
                let mutated = mutate(&mut rng, input, other);
                let outcome = std::panic::catch_unwind(|| body(&mutated));
                assert!(
                    outcome.is_ok(),
                    "{name}: a mutation panicked; add it to the corpus as a regression: {:?}",
                    String::from_utf8_lossy(&mutated)
                );
                ran += 1;
            }
        }
    }
    println!("ran {ran} mutated inputs");
}
