//! Delayed requeue onto a moto queue.

use std::time::Duration;

use dovetail_aws::SqsQueue;
use dovetail_core::reconcile::ports::Queue;
use dovetail_core::reconcile::Resume;

use super::World;

#[tokio::test]
async fn requeue_sends_a_delayed_resume_message() {
    let world = World::new().await;
    let sqs = &world.clients.sqs;
    let url = sqs.create_queue().queue_name("resume").send().await.unwrap().queue_url().unwrap().to_string();
    let queue = SqsQueue::new(sqs.clone(), &url);
    queue.requeue("default-abc", Duration::from_secs(2)).await.unwrap();

    let receive = || sqs.receive_message().queue_url(&url).max_number_of_messages(10).send();
    assert!(receive().await.unwrap().messages().is_empty(), "delayed: not visible yet");
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let got = receive().await.unwrap();
    let bodies: Vec<Resume> = got.messages().iter().map(|m| serde_json::from_str(m.body().unwrap()).unwrap()).collect();
    assert_eq!(bodies, vec![Resume { resume: "default-abc".into() }]);
}
