#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::time::Duration;

use futures::FutureExt;

use super::*;

/// The text of the next message, answered as taken.
async fn take(inbox: &mut Inbox) -> String {
    let letter = inbox.recv().await;
    let text = letter.text.clone();
    letter.answer(Ok(()));
    text
}

#[tokio::test]
async fn messages_sent_before_the_driver_waits_come_in_the_order_they_were_sent() {
    let board = Arc::new(SteeringBoard::default());
    let run = Uuid::now_v7();
    let mut inbox = board.open(run);
    let answers: Vec<_> = ["first", "  second  ", "third"]
        .into_iter()
        .map(|text| board.send(run, text))
        .collect();
    assert_eq!(take(&mut inbox).await, "first");
    assert_eq!(take(&mut inbox).await, "second", "sent trimmed");
    assert_eq!(take(&mut inbox).await, "third");
    assert!(
        inbox.recv().now_or_never().is_none(),
        "no fourth message: the wait goes on"
    );
    for answer in answers {
        assert_eq!(answer.await, Ok(()));
    }
}

#[tokio::test]
async fn a_waiting_driver_is_woken_by_a_message() {
    let board = Arc::new(SteeringBoard::default());
    let run = Uuid::now_v7();
    let mut inbox = board.open(run);
    let mut waiting = Box::pin(take(&mut inbox));
    assert!(
        futures::poll!(waiting.as_mut()).is_pending(),
        "nothing was sent yet: the driver waits"
    );
    let sent = board.send(run, "look at the logs too");
    let text = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("woken by the message");
    assert_eq!(text, "look at the logs too");
    assert_eq!(sent.await, Ok(()));
}

#[tokio::test]
async fn the_sender_gets_the_runs_answer() {
    let board = Arc::new(SteeringBoard::default());
    let run = Uuid::now_v7();
    let mut inbox = board.open(run);
    let sent = board.send(run, "and in euros");
    inbox.recv().await.answer(Err(SteerError::TooLate(run)));
    assert_eq!(sent.await, Err(SteerError::TooLate(run)));
}

#[tokio::test]
async fn a_message_left_in_an_inbox_that_closes_is_refused() {
    let board = Arc::new(SteeringBoard::default());
    let run = Uuid::now_v7();
    let inbox = board.open(run);
    let sent = board.send(run, "never read");
    drop(inbox);
    assert_eq!(sent.await, Err(SteerError::NotRunning(run)));
}

#[tokio::test]
async fn a_wait_given_up_in_a_select_loses_no_message() {
    let board = Arc::new(SteeringBoard::default());
    let run = Uuid::now_v7();
    let mut inbox = board.open(run);
    // The driver waits for a message and for its LLM call; the call answers first.
    tokio::select! {
        biased;
        _ = std::future::ready(()) => {}
        letter = inbox.recv() => panic!("no message was sent, got {:?}", letter.text),
    }
    let _sent = board.send(run, "sent after the wait was dropped");
    assert_eq!(
        inbox.recv().now_or_never().map(|letter| letter.text),
        Some("sent after the wait was dropped".to_string())
    );
}

#[tokio::test]
async fn a_run_without_an_open_inbox_refuses_messages() {
    let board = Arc::new(SteeringBoard::default());
    let run = Uuid::now_v7();
    assert_eq!(
        board.send(run, "hello").await,
        Err(SteerError::NotRunning(run))
    );
    let mut inbox = board.open(run);
    assert_eq!(board.send(run, "   ").await, Err(SteerError::Empty));
    let sent = board.send(run, "hello");
    assert_eq!(take(&mut inbox).await, "hello");
    assert_eq!(sent.await, Ok(()));
    drop(inbox);
    assert_eq!(
        board.send(run, "hello again").await,
        Err(SteerError::NotRunning(run)),
        "closed when the driver let go"
    );
    assert!(board.lock().is_empty(), "the closed inbox left the board");
}
