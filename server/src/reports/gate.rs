//! Turns for heavy reports per client address: at most [`PER_ADDRESS`] of one address's
//! reports that copy lists (`dump`, `cons`, `stat`, `wchc`, `wchp`, the admin routes that
//! list sessions or the tree) are under way at once; the address's further reports wait for
//! a turn (at most [`WAIT`]). One address asking for many reports at once then delays only
//! its own, and the reports' worker never holds more than a few jobs per address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Heavy reports of one address under way at once.
pub const PER_ADDRESS: usize = 2;

/// How long a report waits for its turn before it is dropped unanswered.
pub const WAIT: Duration = Duration::from_secs(30);

/// One address's turns; the entry goes when nobody holds or waits for a turn.
type Turns = HashMap<IpAddr, Arc<Semaphore>>;

fn turns() -> &'static Mutex<Turns> {
    static TURNS: OnceLock<Mutex<Turns>> = OnceLock::new();
    TURNS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// A turn taken: given back (and the address forgotten once idle) when dropped.
pub struct Turn {
    from: IpAddr,
    permit: Option<OwnedSemaphorePermit>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let Ok(mut map) = turns().lock() else {
            return;
        };
        drop(self.permit.take());
        forget_if_idle(&mut map, self.from);
    }
}

/// Removes `from`'s entry when this map holds the only reference (nobody holds a turn or
/// waits for one: a waiter holds a clone of the semaphore).
fn forget_if_idle(map: &mut Turns, from: IpAddr) {
    if map.get(&from).is_some_and(|s| Arc::strong_count(s) == 1) {
        map.remove(&from);
    }
}

/// Waits for one of `from`'s turns; `None` after [`WAIT`].
pub async fn turn(from: IpAddr) -> Option<Turn> {
    turn_within(from, WAIT).await
}

async fn turn_within(from: IpAddr, wait: Duration) -> Option<Turn> {
    let sem = {
        let mut map = turns().lock().ok()?;
        map.entry(from)
            .or_insert_with(|| Arc::new(Semaphore::new(PER_ADDRESS)))
            .clone()
    };
    let permit = tokio::time::timeout(wait, sem.acquire_owned()).await;
    let mut map = turns().lock().ok()?;
    match permit {
        Ok(Ok(permit)) => Some(Turn {
            from,
            permit: Some(permit),
        }),
        _ => {
            // The wait (and its reference to the semaphore) is gone by now.
            forget_if_idle(&mut map, from);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(from: IpAddr) -> bool {
        turns().lock().unwrap().contains_key(&from)
    }

    #[tokio::test]
    async fn an_address_gets_its_turns_and_others_are_not_held_up() {
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let wait = Duration::from_millis(50);
        let first = turn_within(a, wait).await.expect("first turn");
        let second = turn_within(a, wait).await.expect("second turn");
        assert!(
            turn_within(a, wait).await.is_none(),
            "a third waits and gives up"
        );
        let other = turn_within(b, wait)
            .await
            .expect("another address has its own turns");
        drop(first);
        let third = turn_within(a, wait)
            .await
            .expect("a turn given back is taken again");
        drop((second, third, other));
        assert!(!known(a) && !known(b), "idle addresses are forgotten");
    }
}
