//! The HTTP/1.1 server loop: accepts connections until told to stop, serves
//! each with the router, then lets the requests in flight finish.
//!
//! Every connection must send a request's headers within the header
//! timeout ([`HEADER_TIMEOUT`] unless tuned) of opening or of its previous answer (hyper's header
//! read timeout, which also runs while a kept-alive connection sits idle):
//! a client trickling headers, or holding connections open without asking
//! anything, is cut off instead of holding a socket and a task for good.

use std::future::Future;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;

/// Longest a connection may take to send a request's headers, counted from
/// its opening or from the end of its previous answer (idle keep-alive).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` until `stop` completes, then waits for the
/// connections' requests in flight (each connection closes after its
/// current answer). A connection that takes longer than `header_timeout`
/// to send a request's headers is closed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    header_timeout: Duration,
    stop: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        let (stream, _) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: pause, not spin.
                    tracing::warn!(%error, "seckill: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(header_timeout);
        let connection = http.serve_connection(
            TokioIo::new(stream),
            TowerToHyperService::new(router.clone()),
        );
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "seckill: connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
