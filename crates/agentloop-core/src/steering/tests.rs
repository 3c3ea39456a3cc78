#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::time::Duration;

use futures::FutureExt;

use super::*;

#[tokio::test]
async fn messages_sent_before_the_driver_waits_come_in_the_order_they_were_sent() {
    let board = Arc::new(SteeringBoard::default());
    let run = Uuid::now_v7();
    let mut inbox = board.open(run);
    for text in ["first", "  second  ", "third"] {
        board.send(run, text).unwrap();
    }
    assert_eq!(inbox.recv().await, "first");
    assert_eq!(inbox.recv().await, "second", "sent trimmed");
    assert_eq!(inbox.recv().await, "third");
    assert!(
        inbox.recv().now_or_never().is_none(),
        "no fourth message: the wait goes on"
    );
}

#[tokio::test]
async fn a_waiting_driver_is_woken_by_a_message() {
    let board = Arc::new(SteeringBoard::default());
    let run = Uuid::now_v7();
    let mut inbox = board.open(run);
    let waiting = tokio::spawn(async move { inbox.recv().await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!waiting.is_finished(), "nothing was sent yet");
    board.send(run, "look at the logs too").unwrap();
    let text = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("woken by the message")
        .unwrap();
    assert_eq!(text, "look at the logs too");
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
        text = inbox.recv() => panic!("no message was sent, got {text:?}"),
    }
    board.send(run, "sent after the wait was dropped").unwrap();
    assert_eq!(
        inbox.recv().now_or_never().as_deref(),
        Some("sent after the wait was dropped")
    );
}

#[test]
fn a_run_without_an_open_inbox_refuses_messages() {
    let board = Arc::new(SteeringBoard::default());
    let run = Uuid::now_v7();
    assert_eq!(board.send(run, "hello"), Err(SteerError::NotRunning(run)));
    let inbox = board.open(run);
    assert_eq!(board.send(run, "   "), Err(SteerError::Empty));
    assert_eq!(board.send(run, "hello"), Ok(()));
    drop(inbox);
    assert_eq!(
        board.send(run, "hello again"),
        Err(SteerError::NotRunning(run)),
        "closed when the driver let go"
    );
    assert!(board.lock().is_empty(), "the closed inbox left the board");
}
