//! Channels between a worker's sessions and its backend connections, which always share one
//! thread (a worker is a current-thread runtime with a `LocalSet`): a request queue per
//! connection and a reply slot per request, on `Rc` and `Cell` — no atomics, no lock, one
//! allocation per reply slot. Tokio's channels are thread-safe; on this path they cost several
//! hundred instructions per request for a safety the data path does not need.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

// === reply slot ===

struct Slot<T> {
    value: Cell<Option<T>>,
    waker: Cell<Option<Waker>>,
    /// The sender went away (sent, or dropped without sending).
    done: Cell<bool>,
}

/// A one-shot slot for one value, read by one [`SlotRx`].
pub(crate) fn slot<T>() -> (SlotTx<T>, SlotRx<T>) {
    let s = Rc::new(Slot {
        value: Cell::new(None),
        waker: Cell::new(None),
        done: Cell::new(false),
    });
    (SlotTx(s.clone()), SlotRx(s))
}

/// Fills the slot once.
pub(crate) struct SlotTx<T>(Rc<Slot<T>>);

/// Receives the slot's value; `None` when the sender went away without one.
pub(crate) struct SlotRx<T>(Rc<Slot<T>>);

impl<T> SlotTx<T> {
    /// Fills the slot. Gives the value back if the receiver is gone.
    pub(crate) fn send(self, value: T) -> Result<(), T> {
        if Rc::strong_count(&self.0) == 1 {
            return Err(value);
        }
        self.0.value.set(Some(value));
        Ok(())
        // Drop wakes the receiver.
    }
}

impl<T> Drop for SlotTx<T> {
    fn drop(&mut self) {
        self.0.done.set(true);
        if let Some(w) = self.0.waker.take() {
            w.wake();
        }
    }
}

impl<T> Future for SlotRx<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let s = &self.0;
        if let Some(v) = s.value.take() {
            return Poll::Ready(Some(v));
        }
        if s.done.get() {
            return Poll::Ready(None);
        }
        let w = s.waker.take();
        s.waker.set(Some(match w {
            Some(w) if w.will_wake(cx.waker()) => w,
            _ => cx.waker().clone(),
        }));
        Poll::Pending
    }
}

// === request queue ===

struct Queue<T> {
    items: RefCell<VecDeque<T>>,
    waker: Cell<Option<Waker>>,
    senders: Cell<usize>,
    /// The receiver went away: sends fail.
    closed: Cell<bool>,
}

/// A queue with any number of [`QueueTx`] and one [`QueueRx`].
pub(crate) fn queue<T>() -> (QueueTx<T>, QueueRx<T>) {
    let q = Rc::new(Queue {
        items: RefCell::new(VecDeque::new()),
        waker: Cell::new(None),
        senders: Cell::new(1),
        closed: Cell::new(false),
    });
    (QueueTx(q.clone()), QueueRx(q))
}

pub(crate) struct QueueTx<T>(Rc<Queue<T>>);

pub(crate) struct QueueRx<T>(Rc<Queue<T>>);

impl<T> QueueTx<T> {
    /// Queues `item`; gives it back if the receiver is gone.
    pub(crate) fn send(&self, item: T) -> Result<(), T> {
        if self.0.closed.get() {
            return Err(item);
        }
        self.0.items.borrow_mut().push_back(item);
        if let Some(w) = self.0.waker.take() {
            w.wake();
        }
        Ok(())
    }
}

impl<T> Clone for QueueTx<T> {
    fn clone(&self) -> Self {
        self.0.senders.set(self.0.senders.get() + 1);
        QueueTx(self.0.clone())
    }
}

impl<T> Drop for QueueTx<T> {
    fn drop(&mut self) {
        let n = self.0.senders.get() - 1;
        self.0.senders.set(n);
        if n == 0
            && let Some(w) = self.0.waker.take()
        {
            w.wake();
        }
    }
}

impl<T> QueueRx<T> {
    /// Waits for items and moves up to `limit` of them into `out`; 0 once every sender is gone
    /// and the queue is empty.
    pub(crate) async fn recv_many(&mut self, out: &mut Vec<T>, limit: usize) -> usize {
        std::future::poll_fn(|cx| {
            let q = &self.0;
            let mut items = q.items.borrow_mut();
            if !items.is_empty() {
                let n = items.len().min(limit);
                out.extend(items.drain(..n));
                return Poll::Ready(n);
            }
            if q.senders.get() == 0 {
                return Poll::Ready(0);
            }
            q.waker.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await
    }

    /// The next item, or `None` once every sender is gone and the queue is empty.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        let mut one = Vec::with_capacity(1);
        (self.recv_many(&mut one, 1).await > 0)
            .then(|| one.pop())
            .flatten()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.items.borrow().is_empty()
    }

    /// No sender is left.
    pub(crate) fn is_closed(&self) -> bool {
        self.0.senders.get() == 0
    }
}

impl<T> Drop for QueueRx<T> {
    fn drop(&mut self) {
        self.0.closed.set(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn a_slot_delivers_once_or_says_the_sender_went_away() {
        let (tx, rx) = slot();
        assert!(tx.send(5).is_ok());
        assert_eq!(block_on(rx), Some(5));
        let (tx, rx) = slot::<u8>();
        drop(tx);
        assert_eq!(block_on(rx), None);
        let (tx, rx) = slot();
        drop(rx);
        assert_eq!(tx.send(7), Err(7), "nobody to receive it");
    }

    #[test]
    fn a_waiting_receiver_is_woken_by_the_send() {
        block_on(async {
            let local = tokio::task::LocalSet::new();
            local
                .run_until(async {
                    let (tx, rx) = slot();
                    let t = tokio::task::spawn_local(rx);
                    tokio::task::yield_now().await;
                    tx.send("reply").unwrap();
                    assert_eq!(t.await.unwrap(), Some("reply"));
                })
                .await
        });
    }

    #[test]
    fn a_queue_batches_and_ends_when_every_sender_is_gone() {
        let (tx, mut rx) = queue();
        let tx2 = tx.clone();
        for i in 0..5 {
            tx.send(i).unwrap();
        }
        let mut out = Vec::new();
        assert_eq!(block_on(rx.recv_many(&mut out, 3)), 3);
        assert_eq!(block_on(rx.recv_many(&mut out, 10)), 2);
        assert_eq!(out, [0, 1, 2, 3, 4]);
        drop(tx);
        tx2.send(9).unwrap();
        drop(tx2);
        assert!(rx.is_closed());
        assert_eq!(block_on(rx.recv()), Some(9));
        assert_eq!(block_on(rx.recv()), None);
        let (tx, rx) = queue::<u8>();
        drop(rx);
        assert_eq!(tx.send(1), Err(1));
    }
}
