use super::*;

fn spec(capacity_gb: f64, gbps: f64) -> TierSpec {
    TierSpec {
        capacity_gb: Positive(capacity_gb),
        read_gb_per_s: Positive(gbps),
        write_gb_per_s: Positive(gbps),
        latency: SimDuration::from_millis(1),
        eviction: Eviction::Lru,
    }
}

/// 1 MB blocks on 2 GPUs (0.5 MB per GPU).
const LAYOUT: BlockLayout = BlockLayout {
    bytes_per_gpu: 0.5e6,
    gpus: 2,
};

#[test]
fn write_down_cascades_and_conserves_blocks() {
    // Host holds 3 blocks (3 MB), disk 5 (5 MB).
    let s = TiersSpec {
        host: Some(spec(0.003, 1.0)),
        disk: Some(spec(0.005, 1.0)),
        shared: None,
    };
    let mut t = Tiers::new(&s, None, &[LAYOUT]);
    assert_eq!(t.capacity_blocks(TierKind::Host), Some(3));
    assert_eq!(t.capacity_blocks(TierKind::Disk), Some(5));
    let now = SimTime::ZERO;
    t.write_down(0, &[1, 2, 3, 4, 5], now);
    // Host keeps the last 3; 1 and 2 went to disk.
    assert_eq!(t.held(0, TierKind::Host), 3);
    assert_eq!(t.held(0, TierKind::Disk), 2);
    t.write_down(0, &[3], now); // already on host: not written again
    assert_eq!(t.stats[0].blocks_written, 5);
    assert_eq!(t.stats[1].blocks_written, 2);
    // Bytes moved = blocks moved × block bytes (all GPUs).
    assert_eq!(t.stats[0].bytes_written, 5.0 * 1e6);
    assert_eq!(t.stats[1].bytes_written, 2.0 * 1e6);
    t.check().unwrap();

    // Nothing is readable before its write lands (1 ms + 2.5 MB / 1 GB/s = 3.5 ms on the host link).
    assert!(t.locate(0, &[3], now).is_empty());
    let later = SimTime::ZERO + SimDuration::from_millis(100);
    let located = t.locate(0, &[1, 2, 3, 4, 5, 99], later);
    use TierKind::*;
    assert_eq!(located, [Disk, Disk, Host, Host, Host]);
    let end = t.load(0, &[1, 2, 3, 4, 5], &located, 16, later);
    assert!(end > later);
    // A loaded block leaves the worker's tiers: it lives in the GPU now, and nowhere else.
    assert_eq!(t.held(0, Host) + t.held(0, Disk), 0);
    assert_eq!(t.stats[0].blocks_loaded, 3);
    assert_eq!(t.stats[1].blocks_loaded, 2);
    assert_eq!(t.stats[0].bytes_read, 3.0 * 1e6);
    assert_eq!(t.stats[0].tokens_loaded, 3 * 16);
}

#[test]
fn quotes_follow_the_links() {
    // Host: 1 GB/s, 1 ms; shared: 0.1 GB/s, 1 ms. Blocks are 0.5 MB per GPU.
    let s = TiersSpec {
        host: Some(spec(1.0, 1.0)),
        disk: None,
        shared: Some(spec(1.0, 0.1)),
    };
    let t = Tiers::new(&s, None, &[LAYOUT]);
    use TierKind::*;
    let q = t.quotes(0, &[Host, Host, Shared], SimTime::ZERO);
    // k=2: 1 ms + 1 MB / 1 GB/s = 2 ms; k=3: shared's 1 ms + 0.5 MB / 0.1 GB/s = 6 ms (host in parallel).
    assert_eq!(
        q,
        vec![
            (2, SimDuration::from_secs_f64(0.002)),
            (3, SimDuration::from_secs_f64(0.006))
        ]
    );
}

#[test]
fn the_session_store_takes_turns_but_not_evictions() {
    let session = spec(1.0, 1.0);
    let mut t = Tiers::new(&TiersSpec::default(), Some(&session), &[LAYOUT, LAYOUT]);
    t.write_down(0, &[1], SimTime::ZERO);
    assert_eq!(t.held(0, TierKind::Shared), 0);
    t.write_turn(0, &[1, 2], SimTime::ZERO);
    assert_eq!(t.held(1, TierKind::Shared), 2);
    // Another worker finds them once landed; reading does not remove the shared copy.
    let later = SimTime::ZERO + SimDuration::from_secs(1);
    let located = t.locate(1, &[1, 2], later);
    t.load(1, &[1, 2], &located, 16, later);
    assert_eq!(t.held(0, TierKind::Shared), 2);
    // Unavailable: neither found nor written.
    t.shared_available = false;
    assert!(t.locate(1, &[1], later).is_empty());
}

#[test]
fn idle_quotes_show_contents_and_link_speeds_without_touching_anything() {
    // Host holds 2 blocks, disk 3, both on 1 GB/s links with 1 ms latency.
    let s = TiersSpec {
        host: Some(spec(0.002, 1.0)),
        disk: Some(spec(0.003, 1.0)),
        shared: None,
    };
    let mut t = Tiers::new(&s, None, &[LAYOUT]);
    t.write_down(0, &[1, 2, 3, 4], SimTime::ZERO);
    // Host keeps 3 and 4, disk 1 and 2; every write has landed by 100 ms.
    let now = SimTime::ZERO + SimDuration::from_millis(100);
    let before = t.stats.clone();
    let q = t.idle_quotes(0, &[1, 2, 3, 4, 99], now);
    // First 2 blocks from disk: 1 ms + 2 × 0.5 MB per GPU / 1 GB/s = 2 ms. All 4: the slower of
    // disk (2 ms) and host (2 ms) = 2 ms; the deepest tier among them is still disk.
    let ms2 = SimDuration::from_millis(2);
    assert_eq!(q, vec![(2, TierKind::Disk, ms2), (4, TierKind::Disk, ms2)]);
    // Nothing counted, nothing moved.
    assert_eq!(t.stats, before);
    assert_eq!(t.held(0, TierKind::Host), 2);
    assert_eq!(t.held(0, TierKind::Disk), 2);
    // A prefix not held at its first block gives no offer.
    assert!(t.idle_quotes(0, &[99, 1], now).is_empty());
}

#[test]
fn reads_and_writes_take_exactly_their_own_configured_bandwidth() {
    // Read 10 GB/s, write 5 GB/s, 1 ms each; 100 blocks of 0.5 MB per GPU: 50 MB over each GPU's link.
    let s = TiersSpec {
        host: Some(TierSpec {
            read_gb_per_s: Positive(10.0),
            write_gb_per_s: Positive(5.0),
            ..spec(1.0, 1.0)
        }),
        disk: None,
        shared: None,
    };
    let mut t = Tiers::new(&s, None, &[LAYOUT]);
    let hashes: Vec<u64> = (1..=100).collect();
    t.write_down(0, &hashes, SimTime::ZERO);
    // Written at 5 GB/s: readable at 1 ms + 50 MB / 5 GB/s = 11 ms, not a nanosecond before.
    let landed = SimTime::ZERO + SimDuration::from_millis(11);
    assert!(t.locate(0, &[1], SimTime(landed.0 - 1)).is_empty());
    let at = SimTime::ZERO + SimDuration::from_secs(1);
    let located = t.locate(0, &hashes, at);
    assert_eq!(located.len(), 100);
    // Read at 10 GB/s: 1 ms + 50 MB / 10 GB/s = 6 ms, quoted and booked alike.
    let six_ms = SimDuration::from_millis(6);
    assert_eq!(t.quotes(0, &located, at), [(100, six_ms)]);
    assert_eq!(
        t.idle_quotes(0, &hashes, at),
        [(100, TierKind::Host, six_ms)]
    );
    assert_eq!(t.load(0, &hashes, &located, 16, at), at + six_ms);
    assert_eq!(t.stats[0].bytes_read, 100.0 * 1e6);
}
