//! A list predicate compiled to index-friendly branches.
//!
//! The predicate is put in disjunctive normal form; every conjunction is driven by one of its
//! leaves (an index range read newest-first) and filtered by the rest. A multi-valued leaf is
//! one branch per value: `ChannelsIn[a, b]` is the branches `channel_id = a` and
//! `channel_id = b`, each its own `(channel_id, created_at, id)` range. Branches with the same
//! driving column and filters form a group, which the SQL back ends read with one bound array
//! (`unnest` on Postgres, `json_each` on SQLite), so the width is one parameter.

use authz_core::Predicate;

use crate::StoreError;

/// The indexed columns a leaf reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Column {
    Channel,
    Visibility,
    User,
    Repo,
}

impl Column {
    pub fn sql(self) -> &'static str {
        match self {
            Column::Channel => "channel_id",
            Column::Visibility => "channel_visibility",
            Column::User => "user_id",
            Column::Repo => "repo",
        }
    }

    /// The index a branch driven by this column reads: `(column, created_at DESC, id DESC)`.
    pub fn index(self) -> &'static str {
        match self {
            Column::Channel => "runs_channel_page",
            Column::Visibility => "runs_visibility_page",
            Column::User => "runs_user_page",
            Column::Repo => "runs_repo_page",
        }
    }
}

/// `column IN (values)`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Atom {
    pub column: Column,
    pub values: Vec<String>,
}

/// Branches driven by `drive` (one per value), all filtered by `filters`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub drive: Column,
    pub values: Vec<String>,
    pub filters: Vec<Atom>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Matches nothing: the database is never asked.
    Nothing,
    /// Matches everything: no filter.
    Everything,
    Groups(Vec<Group>),
}

/// The most groups a predicate may expand to (an `And` of `Or`s multiplies out).
pub const MAX_GROUPS: usize = 64;

/// Checks the predicate (`max_width` bounds every list) and compiles it.
pub fn plan(p: &Predicate, max_width: usize) -> Result<Plan, StoreError> {
    p.check(max_width).map_err(StoreError::MalformedPredicate)?;
    let conjunctions = dnf(p)?;
    if conjunctions.iter().any(Vec::is_empty) {
        return Ok(Plan::Everything);
    }
    let mut groups: Vec<Group> = Vec::new();
    for mut conj in conjunctions {
        conj.sort();
        // Drive by the narrowest leaf.
        let Some(at) =
            (0..conj.len()).min_by_key(|&i| conj.get(i).map_or(usize::MAX, |a| a.values.len()))
        else {
            continue;
        };
        let drive = conj.remove(at);
        match groups
            .iter_mut()
            .find(|g| g.drive == drive.column && g.filters == conj)
        {
            Some(g) => {
                for v in drive.values {
                    if !g.values.contains(&v) {
                        g.values.push(v);
                    }
                }
            }
            None => groups.push(Group {
                drive: drive.column,
                values: drive.values,
                filters: conj,
            }),
        }
    }
    groups.retain(|g| !g.values.is_empty());
    if groups.is_empty() {
        return Ok(Plan::Nothing);
    }
    if groups.len() > MAX_GROUPS {
        return Err(StoreError::MalformedPredicate(
            authz_core::MalformedPredicate::TooWide {
                len: groups.len(),
                max: MAX_GROUPS,
            },
        ));
    }
    for g in &mut groups {
        g.values.sort();
    }
    Ok(Plan::Groups(groups))
}

type Conjunction = Vec<Atom>;

/// Disjunctive normal form: a list of conjunctions of atoms. `[]` is false; `[[]]` is true.
fn dnf(p: &Predicate) -> Result<Vec<Conjunction>, StoreError> {
    let atom = |column, values: Vec<String>| Ok(vec![vec![Atom { column, values }]]);
    match p {
        Predicate::None => Ok(vec![]),
        Predicate::All => Ok(vec![vec![]]),
        Predicate::ChannelsIn(v) => {
            atom(Column::Channel, v.iter().map(ToString::to_string).collect())
        }
        Predicate::VisibilityIn(v) => atom(
            Column::Visibility,
            v.iter().map(|x| x.as_str().to_owned()).collect(),
        ),
        Predicate::UserIs(id) => atom(Column::User, vec![id.to_string()]),
        Predicate::ReposIn(v) => atom(Column::Repo, v.iter().map(ToString::to_string).collect()),
        Predicate::Or(ps) => {
            let mut out = Vec::new();
            for p in ps {
                out.extend(dnf(p)?);
            }
            Ok(out)
        }
        Predicate::And(ps) => {
            let mut acc: Vec<Conjunction> = vec![vec![]];
            for p in ps {
                let next = dnf(p)?;
                let mut product = Vec::with_capacity(acc.len() * next.len());
                for a in &acc {
                    for b in &next {
                        product.push(a.iter().chain(b).cloned().collect());
                    }
                }
                if product.len() > MAX_GROUPS * 4 {
                    return Err(StoreError::MalformedPredicate(
                        authz_core::MalformedPredicate::TooWide {
                            len: product.len(),
                            max: MAX_GROUPS * 4,
                        },
                    ));
                }
                acc = product;
            }
            Ok(acc)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use authz_core::ChannelVisibility;

    fn ch(s: &str) -> authz_core::ChannelId {
        s.parse().unwrap()
    }

    #[test]
    fn the_usual_run_read_is_three_groups() {
        let p = Predicate::Or(vec![
            Predicate::ChannelsIn(vec![ch("slack:C2"), ch("slack:C1")]),
            Predicate::VisibilityIn(vec![ChannelVisibility::Public]),
            Predicate::UserIs("slack:U1".parse().unwrap()),
        ]);
        let Plan::Groups(g) = plan(&p, 100).unwrap() else {
            panic!()
        };
        assert_eq!(g.len(), 3);
        assert_eq!(g[0].drive, Column::Channel);
        assert_eq!(g[0].values, vec!["slack:C1", "slack:C2"]);
        assert!(g.iter().all(|g| g.filters.is_empty()));
    }

    #[test]
    fn none_all_and_empty_lists() {
        assert_eq!(plan(&Predicate::None, 10).unwrap(), Plan::Nothing);
        assert_eq!(plan(&Predicate::All, 10).unwrap(), Plan::Everything);
        assert_eq!(
            plan(&Predicate::ChannelsIn(vec![]), 10).unwrap(),
            Plan::Nothing
        );
        assert_eq!(
            plan(&Predicate::Or(vec![Predicate::None, Predicate::All]), 10).unwrap(),
            Plan::Everything
        );
    }

    #[test]
    fn and_drives_by_the_narrowest_leaf_and_filters_by_the_rest() {
        let p = Predicate::And(vec![
            Predicate::ChannelsIn(vec![ch("slack:C1"), ch("slack:C2")]),
            Predicate::ReposIn(vec!["acme/web".parse().unwrap()]),
        ]);
        let Plan::Groups(g) = plan(&p, 10).unwrap() else {
            panic!()
        };
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].drive, Column::Repo);
        assert_eq!(
            g[0].filters,
            vec![Atom {
                column: Column::Channel,
                values: vec!["slack:C1".into(), "slack:C2".into()]
            }]
        );
    }

    #[test]
    fn malformed_predicates_are_errors_never_everything() {
        for p in [
            Predicate::And(vec![]),
            Predicate::Or(vec![]),
            Predicate::ChannelsIn(vec![ch("slack:C1"); 11]),
        ] {
            assert!(
                matches!(plan(&p, 10), Err(StoreError::MalformedPredicate(_))),
                "{p:?}"
            );
        }
    }
}
