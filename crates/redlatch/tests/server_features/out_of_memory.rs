//! Every primitive on a server out of memory (`maxmemory` reached under
//! `noeviction`), in both script forms (functions, and EVALSHA): a busy
//! primitive answers busy, a held one is given back and renewed, and what a
//! free one does is the documented outcome of its form (docs/SAFETY.md,
//! "Redis out of memory"). One server for every row; the rows are prepared
//! while memory is there, checked under OOM, and looked at again after.
//! Re-entered holds, Redlock's fixed lease and its counter write-back too.

use std::time::{Duration, Instant};

use redlatch::{AcquireLock, Client, HeldLock, Redlock, Reenter};

use crate::common;

/// The watchdog lease of the holds that must stay renewed under OOM.
const SHORT_LEASE: Duration = Duration::from_millis(600);
/// How long those holds must last under OOM: several renewals.
const RENEWED_FOR: Duration = Duration::from_secs(2);
/// A Redlock hold's fixed lease, lengthened under OOM: shorter than
/// [`RENEWED_FOR`], so only the extension keeps it.
const FIXED_LEASE: Duration = Duration::from_millis(1500);
/// A bounded wait for a busy primitive.
const BUSY_WAIT: Duration = Duration::from_millis(300);

/// What a call answered, as the table compares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Taken,
    Busy,
    OutOfMemory,
    Other,
}

fn answer<T>(result: &redlatch::Result<Option<T>>) -> Answer {
    match result {
        Ok(Some(_)) => Answer::Taken,
        Ok(None) => Answer::Busy,
        Err(error) if format!("{error:?}").contains("OOM") => Answer::OutOfMemory,
        Err(_) => Answer::Other,
    }
}

/// A bounded wait's not-acquired outcome: `Timeout` for a lock,
/// `NoPermits` for a semaphore.
fn not_acquired<T>(result: &redlatch::Result<T>) -> bool {
    matches!(
        result,
        Err(redlatch::Error::Timeout { .. } | redlatch::Error::NoPermits { .. })
    )
}

fn describe<T>(result: &redlatch::Result<T>) -> String {
    match result {
        Ok(_) => "Ok".to_owned(),
        Err(error) => format!("Err({error})"),
    }
}

/// What a free primitive (row `row`) does under OOM in each form: a
/// function (flag `allow-oom`) lets the hold's few bytes past `maxmemory`;
/// by EVALSHA the server refuses a script's first write that may take
/// memory, so a fair lock and a read lock, whose scripts first drop stale
/// waiters (a write that takes none), are taken and the others refused.
fn free_answer(form: &str, row: &str) -> Answer {
    if form == "functions" || row.starts_with("fair") || row.starts_with("read") {
        Answer::Taken
    } else {
        Answer::OutOfMemory
    }
}

/// One primitive in one form, prepared while the server has memory: a
/// stranger holds `busy`, this client holds one hold to give back and one
/// kept by the watchdog on a short lease; `free` is free.
struct Row<L: AcquireLock, S: AcquireLock> {
    row: String,
    form: &'static str,
    busy: L,
    free: L,
    /// The hold given back under OOM, and the stranger's handle that must
    /// find it free after.
    released: (S, Option<L::Guard>),
    renewed: Option<L::Guard>,
    _stranger: S::Guard,
}

impl<L: AcquireLock, S: AcquireLock> Row<L, S>
where
    L::Guard: HeldLock,
    S::Guard: HeldLock,
{
    /// `mine` makes the primitive of a name for this client, `stranger`
    /// the one that excludes it (the same kind, or a read-write lock's
    /// other side) for another client.
    async fn prepare(
        row: &str,
        form: &'static str,
        mine: impl Fn(String) -> L,
        stranger: impl Fn(String) -> S,
    ) -> Row<L, S> {
        let name = |what: &str| format!("oom:{row}:{form}:{what}");
        let held = stranger(name("busy"))
            .acquire()
            .await
            .expect("the stranger's hold");
        let released = mine(name("released"));
        let to_release = released.acquire().await.expect("the hold to give back");
        let renewed = mine(name("renewed"))
            .acquire()
            .await
            .expect("the renewed hold");
        Row {
            row: row.to_owned(),
            form,
            busy: mine(name("busy")),
            free: mine(name("free")),
            released: (stranger(name("released")), Some(to_release)),
            renewed: Some(renewed),
            _stranger: held,
        }
    }

    /// Under OOM: busy answers busy, free answers as its form does, and the
    /// hold given back is given back.
    async fn under_oom(&mut self, failures: &mut Vec<String>) {
        let at = format!("{} ({})", self.row, self.form);
        let once = self.busy.try_acquire().await;
        if answer(&once) != Answer::Busy {
            failures.push(format!(
                "{at}: try_acquire of a busy one answered {:?}: {}",
                answer(&once),
                describe(&once)
            ));
        }
        let waited = self.busy.acquire_within(Some(BUSY_WAIT)).await;
        if !not_acquired(&waited) {
            failures.push(format!(
                "{at}: acquire_timeout of a busy one ended with {}",
                describe(&waited)
            ));
        }
        let free = self.free.try_acquire().await;
        if answer(&free) != free_answer(self.form, &self.row) {
            failures.push(format!(
                "{at}: try_acquire of a free one answered {:?}: {}",
                answer(&free),
                describe(&free)
            ));
        }
        if let Ok(Some(guard)) = free {
            let given = guard.release().await;
            if given.is_err() {
                failures.push(format!(
                    "{at}: the free one taken was not given back: {}",
                    describe(&given)
                ));
            }
        }
        let guard = self.released.1.take().expect("released once");
        let given = guard.release().await;
        if given.is_err() {
            failures.push(format!("{at}: release answered {}", describe(&given)));
        }
    }

    /// After [`RENEWED_FOR`] under OOM: the watchdog kept its hold.
    fn still_renewed(&self, failures: &mut Vec<String>) {
        let guard = self.renewed.as_ref().expect("renewed");
        if !guard.is_held() {
            failures.push(format!(
                "{} ({}): a {SHORT_LEASE:?} watchdog hold was lost under OOM: {:?}",
                self.row,
                self.form,
                guard.lost_reason()
            ));
        }
    }

    /// With memory back: what was given back under OOM is free.
    async fn after(mut self, failures: &mut Vec<String>) {
        match self.released.0.try_acquire().await {
            Ok(Some(guard)) => {
                let _ = guard.release().await;
            }
            other => failures.push(format!(
                "{} ({}): after its release under OOM the hold stayed: {:?}",
                self.row,
                self.form,
                answer(&other)
            )),
        }
        if let Some(guard) = self.renewed.take() {
            let _ = guard.release().await;
        }
    }
}

/// A hold re-entered while memory was there, of one form: under OOM a
/// re-entry answers as a free primitive does (one more hold), and giving
/// back the inner hold (one hold fewer, never more memory) is a release,
/// which must run in both forms.
struct Reentered<G: Reenter> {
    at: String,
    form: &'static str,
    outer: G,
    inner: Option<G>,
}

impl<G: Reenter> Reentered<G> {
    async fn prepare(at: String, form: &'static str, outer: redlatch::Result<G>) -> Reentered<G> {
        let outer = outer.expect("the hold to re-enter");
        let inner = outer.reenter().await.expect("a re-entry with memory there");
        Reentered {
            at,
            form,
            outer,
            inner: Some(inner),
        }
    }

    async fn under_oom(&mut self, failures: &mut Vec<String>) {
        let again = self.outer.reenter().await.map(Some);
        if answer(&again) != free_answer(self.form, &self.at) {
            failures.push(format!(
                "{} ({}): a re-entry answered {:?}: {}",
                self.at,
                self.form,
                answer(&again),
                describe(&again)
            ));
        }
        if let Ok(Some(third)) = again {
            let given = third.release().await;
            if given.is_err() {
                failures.push(format!(
                    "{} ({}): the third hold's release answered {}",
                    self.at,
                    self.form,
                    describe(&given)
                ));
            }
        }
        let inner = self.inner.take().expect("released once");
        let given = inner.release().await;
        if given.is_err() || !self.outer.is_held() {
            failures.push(format!(
                "{} ({}): the inner hold's release answered {} (outer held: {})",
                self.at,
                self.form,
                describe(&given),
                self.outer.is_held()
            ));
        }
    }

    async fn after(self, failures: &mut Vec<String>) {
        let given = self.outer.release().await;
        if given.is_err() {
            failures.push(format!(
                "{} ({}): the outer hold's release answered {}",
                self.at,
                self.form,
                describe(&given)
            ));
        }
    }
}

/// The counting semaphore of one form (no lease, so nothing to renew):
/// `try_set` and `add`, and its permits taken and given back.
struct SemaphoreRow {
    at: String,
    form: &'static str,
    client: Client,
    /// Its one permit taken by a stranger.
    busy: redlatch::Semaphore,
    /// One permit left.
    free: redlatch::Semaphore,
    /// Its one permit held here, given back under OOM.
    released: (redlatch::Semaphore, Option<redlatch::SemaphorePermit>),
    _stranger: redlatch::SemaphorePermit,
}

impl SemaphoreRow {
    async fn prepare(
        at: String,
        form: &'static str,
        client: &Client,
        stranger: &Client,
    ) -> SemaphoreRow {
        let name = |what: &str| format!("oom:{at}:{form}:{what}");
        for what in ["busy", "free", "released"] {
            assert!(
                client
                    .semaphore(name(what))
                    .try_set_permits(1)
                    .await
                    .unwrap()
            );
        }
        let held = stranger.semaphore(name("busy")).acquire().await.unwrap();
        let released = client.semaphore(name("released"));
        let permit = released.acquire().await.unwrap();
        SemaphoreRow {
            busy: client.semaphore(name("busy")),
            free: client.semaphore(name("free")),
            released: (released, Some(permit)),
            _stranger: held,
            client: client.clone(),
            at,
            form,
        }
    }

    async fn under_oom(&mut self, failures: &mut Vec<String>) {
        let at = format!("{} ({})", self.at, self.form);
        let once = self.busy.try_acquire().await;
        if answer(&once) != Answer::Busy {
            failures.push(format!(
                "{at}: try_acquire of a busy one answered {:?}: {}",
                answer(&once),
                describe(&once)
            ));
        }
        let waited = self.busy.acquire_within(Some(BUSY_WAIT)).await;
        if !not_acquired(&waited) {
            failures.push(format!(
                "{at}: acquire_timeout of a busy one ended with {}",
                describe(&waited)
            ));
        }
        let free = self.free.try_acquire().await;
        if answer(&free) != free_answer(self.form, &self.at) {
            failures.push(format!(
                "{at}: try_acquire of a free one answered {:?}: {}",
                answer(&free),
                describe(&free)
            ));
        }
        if let Ok(Some(permit)) = free {
            let given = permit.release().await;
            if given.is_err() {
                failures.push(format!(
                    "{at}: the free permit taken was not given back: {}",
                    describe(&given)
                ));
            }
        }
        let permit = self.released.1.take().expect("released once");
        let given = permit.release().await;
        if given.is_err() {
            failures.push(format!("{at}: release answered {}", describe(&given)));
        }
        // A count already set: answered, nothing written.
        let set = self.busy.try_set_permits(5).await;
        if !matches!(set, Ok(false)) {
            failures.push(format!(
                "{at}: try_set_permits on a set count answered {set:?}"
            ));
        }
        // A count not there yet: written as a free lock's hold is.
        let fresh = self
            .client
            .semaphore(format!("oom:{}:{}:fresh", self.at, self.form));
        let set = fresh.try_set_permits(1).await.map(|set| set.then_some(()));
        if answer(&set) != free_answer(self.form, &self.at) {
            failures.push(format!(
                "{at}: try_set_permits on no count answered {:?}: {}",
                answer(&set),
                describe(&set)
            ));
        }
        // Permits added to a count that is there: it grows by nothing, as a
        // release, so in both forms.
        let added = self.released.0.add_permits(1).await;
        if added.is_err() {
            failures.push(format!(
                "{at}: add_permits to a count answered {}",
                describe(&added)
            ));
        }
    }

    async fn after(self, failures: &mut Vec<String>) {
        let left = self.released.0.available_permits().await;
        if !matches!(left, Ok(2)) {
            failures.push(format!(
                "{} ({}): after its release and an add under OOM the count is {left:?}, not 2",
                self.at, self.form
            ));
        }
    }
}

/// `CONFIG SET maxmemory`: 1 byte puts the server over it at once.
async fn set_maxmemory(admin: &mut redis::aio::MultiplexedConnection, bytes: u64) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(bytes)
        .query_async(admin)
        .await
        .unwrap();
}

/// `$body` for each of the row lists (of different types), in order.
macro_rules! each {
    ([$($rows:ident),+ $(,)?], |$var:ident| $body:expr) => {
        $( { let $var = &mut $rows; $body; } )+
    };
}

/// Every primitive, both forms, on one server out of memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_primitive_answers_as_it_should_when_the_server_is_out_of_memory() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let functions = common::client_with_lease(&server, SHORT_LEASE).await;
    let evalsha = common::evalsha_client_at(&server.url(), SHORT_LEASE).await;
    let stranger = common::client(&server).await;
    let has_functions = functions.capabilities().functions.is_available();
    let forms: Vec<(&'static str, &Client)> = if has_functions {
        vec![("functions", &functions), ("EVALSHA", &evalsha)]
    } else {
        // A server without functions runs both clients by EVALSHA.
        vec![("EVALSHA", &functions), ("EVALSHA", &evalsha)]
    };
    let stranger_redlock = Redlock::new(vec![stranger.clone()]).unwrap();

    let mut failures = Vec::new();
    let mut locks = Vec::new();
    let mut fairs = Vec::new();
    let mut spins = Vec::new();
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    let mut permits = Vec::new();
    let mut redlocks = Vec::new();
    let mut semaphores = Vec::new();
    let mut reentered_locks = Vec::new();
    let mut reentered_reads = Vec::new();
    let mut reentered_writes = Vec::new();
    let mut reentered_redlocks = Vec::new();
    let mut fixed_redlocks = Vec::new();
    let mut redlocks_by_form = Vec::new();
    for (n, &(form, client)) in forms.iter().enumerate() {
        let form_row = |row: &str| format!("{row}{n}");
        locks.push(
            Row::prepare(
                &form_row("lock"),
                form,
                |name| client.lock(name),
                |name| stranger.lock(name),
            )
            .await,
        );
        fairs.push(
            Row::prepare(
                &form_row("fair"),
                form,
                |name| client.fair_lock(name),
                |name| stranger.fair_lock(name),
            )
            .await,
        );
        spins.push(
            Row::prepare(
                &form_row("spin"),
                form,
                |name| client.spin_lock(name),
                |name| stranger.spin_lock(name),
            )
            .await,
        );
        reads.push(
            Row::prepare(
                &form_row("read"),
                form,
                |name| client.read_write_lock(name).reader(),
                // Busy for a reader: a writer holds it.
                |name| stranger.read_write_lock(name).writer(),
            )
            .await,
        );
        writes.push(
            Row::prepare(
                &form_row("write"),
                form,
                |name| client.read_write_lock(name).writer(),
                // Busy for a writer: a reader holds it.
                |name| stranger.read_write_lock(name).reader(),
            )
            .await,
        );
        let permit_row = form_row("permit");
        for what in ["busy", "free", "released", "renewed"] {
            // One permit each: the stranger's (or this client's) hold makes
            // it busy; `free` keeps its permit for the check under OOM.
            let name = format!("oom:{permit_row}:{form}:{what}");
            assert!(
                client
                    .permit_semaphore(name)
                    .try_set_permits(1)
                    .await
                    .unwrap()
            );
        }
        permits.push(
            Row::prepare(
                &permit_row,
                form,
                |name| client.permit_semaphore(name),
                |name| stranger.permit_semaphore(name),
            )
            .await,
        );
        semaphores
            .push(SemaphoreRow::prepare(form_row("semaphore"), form, client, &stranger).await);
        let name = |what: &str| format!("oom:reentered{n}:{form}:{what}");
        reentered_locks.push(
            Reentered::prepare(
                name("lock"),
                form,
                client.lock(name("lock")).acquire().await,
            )
            .await,
        );
        reentered_locks.push(
            Reentered::prepare(
                name("fair"),
                form,
                client.fair_lock(name("fair")).acquire().await,
            )
            .await,
        );
        let rw = client.read_write_lock(name("rw-read"));
        reentered_reads.push(Reentered::prepare(name("rw-read"), form, rw.read().await).await);
        let rw = client.read_write_lock(name("rw-write"));
        reentered_writes.push(Reentered::prepare(name("rw-write"), form, rw.write().await).await);
        let redlock = Redlock::new(vec![(*client).clone()]).unwrap();
        redlocks.push(
            Row::prepare(
                &form_row("redlock"),
                form,
                |name| redlock.lock(name),
                |name| stranger_redlock.lock(name),
            )
            .await,
        );
        reentered_redlocks.push(
            Reentered::prepare(
                name("redlock"),
                form,
                redlock.lock(name("redlock")).acquire().await,
            )
            .await,
        );
        redlocks_by_form.push((form, redlock));
    }

    // Fixed leases taken last, to be lengthened first under OOM.
    for (form, redlock) in &redlocks_by_form {
        let fixed = redlock
            .lock(format!("oom:redlock-fixed:{form}"))
            .with_lease(FIXED_LEASE)
            .acquire()
            .await
            .expect("a fixed-lease Redlock hold");
        fixed_redlocks.push((*form, fixed));
    }
    set_maxmemory(&mut admin, 1).await;
    let oom_since = Instant::now();
    for (form, fixed) in &fixed_redlocks {
        // A fixed lease lengthened by hand: PEXPIRE, never refused.
        let extended = fixed.extend(FIXED_LEASE * 4).await;
        if extended.is_err() {
            failures.push(format!(
                "redlock ({form}): extend answered {}",
                describe(&extended)
            ));
        }
    }
    each!(
        [
            locks,
            fairs,
            spins,
            reads,
            writes,
            permits,
            redlocks,
            semaphores,
            reentered_locks,
            reentered_reads,
            reentered_writes,
            reentered_redlocks
        ],
        |rows| for row in rows.iter_mut() {
            row.under_oom(&mut failures).await;
        }
    );
    tokio::time::sleep(RENEWED_FOR.saturating_sub(oom_since.elapsed())).await;
    each!(
        [locks, fairs, spins, reads, writes, permits, redlocks],
        |rows| rows.iter().for_each(|row| row.still_renewed(&mut failures))
    );
    for (form, fixed) in &fixed_redlocks {
        if !fixed.is_held() {
            failures.push(format!(
                "redlock ({form}): a {FIXED_LEASE:?} lease extended under OOM ran out"
            ));
        }
    }

    set_maxmemory(&mut admin, 0).await;
    each!(
        [
            locks,
            fairs,
            spins,
            reads,
            writes,
            permits,
            redlocks,
            semaphores,
            reentered_locks,
            reentered_reads,
            reentered_writes,
            reentered_redlocks
        ],
        |rows| for row in rows.drain(..) {
            row.after(&mut failures).await;
        }
    );
    for (_, fixed) in fixed_redlocks {
        let _ = fixed.release().await;
    }
    assert!(failures.is_empty(), "under OOM:\n{}", failures.join("\n"));
}

/// A Redlock whose nodes' fencing counters differ writes the highest back
/// to a majority before it hands out the guard (`RAISE_TOKEN`): on nodes
/// out of memory that write must run as the acquire's did, or a free lock
/// the acquire took on every node is refused for the write-back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_whose_counters_lag_is_taken_on_nodes_out_of_memory() {
    let masters = common::masters(3);
    let mut admins = Vec::new();
    let mut clients = Vec::new();
    for server in masters.iter() {
        admins.push(common::admin(server).await);
        clients.push(common::client(server).await);
    }
    if !clients[0].capabilities().functions.is_available() {
        // By EVALSHA a free lock is refused with OOM before any write-back.
        return;
    }
    // Three different counters: whichever majority answers first, its
    // tokens differ, and the highest must be written back to the other.
    for (admin, counter) in admins.iter_mut().zip([100, 200]) {
        let _: () = redis::cmd("SET")
            .arg("redlatch_lock_token")
            .arg(counter)
            .query_async(admin)
            .await
            .unwrap();
    }
    for admin in &mut admins {
        set_maxmemory(admin, 1).await;
    }
    let redlock = Redlock::new(clients).unwrap();
    let taken = redlock.lock("oom:lagging").try_acquire().await;
    for admin in &mut admins {
        set_maxmemory(admin, 0).await;
    }
    let guard = match taken {
        Ok(Some(guard)) => guard,
        other => panic!(
            "a free Redlock with lagging counters under OOM answered {:?}: {}",
            answer(&other),
            describe(&other)
        ),
    };
    guard.release().await.unwrap();
}
