//! Which GPUs are reported: the rows of issue 15's table
//! (`CUDA_VISIBLE_DEVICES` against the devices NVML lists, cgroups, UUIDs)
//! and a property test that `host.gpu.count` and the metric devices always
//! agree. The helpers are the parent module's.

use super::*;

// ------------------------------------------- issue 15's table, four GPUs

#[test]
fn row_empty_value_is_no_gpu() {
    assert_eq!(count_and_ids(&Fake::gpus(4), Some("")), (Some(0), vec![]));
}

#[test]
fn row_index_past_the_last_gpu_is_no_gpu() {
    assert_eq!(count_and_ids(&Fake::gpus(4), Some("7")), (Some(0), vec![]));
}

#[test]
fn row_invalid_index_ends_the_list() {
    assert_eq!(
        count_and_ids(&Fake::gpus(4), Some("0,7,1")),
        (Some(1), vec![uuid(0)])
    );
}

#[test]
fn row_repeated_index_is_no_gpu() {
    assert_eq!(
        count_and_ids(&Fake::gpus(4), Some("0,0")),
        (Some(0), vec![])
    );
}

#[test]
fn row_junk_is_no_gpu() {
    assert_eq!(
        count_and_ids(&Fake::gpus(4), Some("xyz")),
        (Some(0), vec![])
    );
}

/// Eight GPUs, a cgroup hiding all but 2 and 5.
fn cgroup_hiding_six_of_eight() -> Fake {
    let fake = Fake::gpus(8);
    for i in [0, 1, 3, 4, 6, 7] {
        fake.edit(i, |g| g.accessible = false);
    }
    fake
}

#[test]
fn row_unset_with_a_cgroup_hiding_six_of_eight() {
    let fake = cgroup_hiding_six_of_eight();
    assert_eq!(
        count_and_ids(&fake, None),
        (Some(2), vec![uuid(2), uuid(5)])
    );
    // indices count accessible devices
    assert_eq!(count_and_ids(&fake, Some("1")), (Some(1), vec![uuid(5)]));
    assert_eq!(count_and_ids(&fake, Some("2")), (Some(0), vec![]));
}

#[test]
fn uuid_rules_through_metrics() {
    let fake = Fake::gpus(4);
    let one = |raw: &str| count_and_ids(&fake, Some(raw));
    assert_eq!(one("GPU-00000002"), (Some(1), vec![uuid(2)]));
    assert_eq!(one("00000002-1111"), (Some(0), vec![]), "a bare prefix");
    assert_eq!(one("00000002"), (Some(1), vec![uuid(2)]), "this is index 2");
    assert_eq!(one("GPU-0000000"), (Some(0), vec![]), "ambiguous prefix");
    assert_eq!(one("GPU-"), (Some(0), vec![]));
    assert_eq!(
        count_and_ids(&Fake::gpus(1), Some("GPU-")),
        (Some(0), vec![])
    );
}

// ------------------------------------------------------ property test

/// A random device table and a random `CUDA_VISIBLE_DEVICES`.
fn case(rng: &mut Rng) -> (Fake, Option<String>) {
    let n = rng.below(6) as u32;
    let table: Vec<FakeGpu> = (0..n)
        .map(|i| {
            let mut g = FakeGpu::new(i);
            g.uuid = format!("GPU-{}-{i}", rng.hex(4, "ab"));
            g.accessible = rng.below(5) != 0;
            g.migs = (0..rng.below(3))
                .map(|k| format!("MIG-{}-{i}{k}", rng.hex(3, "ab")))
                .collect();
            g
        })
        .collect();
    let mut entries: Vec<String> = Vec::new();
    for _ in 0..rng.below(5) {
        let pick = |rng: &mut Rng, v: &[String]| v.get(rng.below(v.len())).cloned();
        let uuids: Vec<String> = table.iter().map(|g| g.uuid.clone()).collect();
        let migs: Vec<String> = table.iter().flat_map(|g| g.migs.clone()).collect();
        let cut = |rng: &mut Rng, s: String| {
            let len = 4 + rng.below(s.len() - 3);
            s.get(..len).unwrap_or(&s).to_owned()
        };
        let e = match rng.below(9) {
            0 => rng.below(7).to_string(),
            1 => ["-1", "xyz", "", "GPU-", "MIG-", "NoDevFiles"][rng.below(6)].into(),
            2 | 3 => pick(rng, &uuids).map_or("GPU-a".into(), |u| cut(rng, u)),
            4 => pick(rng, &migs).map_or("MIG-a".into(), |u| cut(rng, u)),
            5 => rng.hex(3, "ab"),
            6 => pick(rng, &entries).unwrap_or_default(),
            _ => rng.below(3).to_string(),
        };
        entries.push(e);
    }
    let raw = (rng.below(6) != 0).then(|| entries.join(","));
    (Fake::new(table), raw)
}

#[test]
fn property_gpu_count_and_metric_devices_always_agree() {
    let mut rng = Rng(0x15_0015_d1ce_5eed);
    let mut nonzero = 0;
    for _ in 0..200 {
        let (fake, raw) = case(&mut rng);
        let (w, _) = fake.worker(raw.as_deref(), FAST);
        let discovered: Vec<String> = match w.devices(PATIENCE) {
            Some(Ok(d)) => d.into_iter().map(|d| d.id).collect(),
            other => panic!("{raw:?}: {other:?}"),
        };
        w.stop();
        let (count, ids) = count_and_ids(&fake, raw.as_deref());
        let mut want = discovered.clone();
        want.sort();
        assert_eq!(count, Some(ids.len()), "{raw:?} over {:?}", fake.0.table);
        assert_eq!(ids, want, "{raw:?}");
        let accessible = fake
            .0
            .table
            .lock()
            .unwrap()
            .iter()
            .filter(|g| g.accessible)
            .count();
        assert!(ids.len() <= accessible);
        if raw
            .as_deref()
            .is_some_and(|r| r.trim_start().to_ascii_uppercase().starts_with("MIG-"))
        {
            assert!(ids.len() <= 1, "{raw:?}: one MIG instance");
        }
        nonzero += usize::from(!ids.is_empty());
    }
    assert!(
        nonzero > 20,
        "the generator selects too few devices: {nonzero}"
    );
}
