//! The native transport as an operator controls it: started at boot when
//! `start_native_transport` says so, stopped and started again by
//! `nodetool disablebinary` / `enablebinary`, stopped by a failure policy
//! that says so. Stopping closes the listener and every client connection,
//! as Cassandra's `Server.stop` does.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct NativeTransport {
    server: Arc<sibyl_transport::Server>,
    /// Where it listens (the configured address; after the first start, the
    /// bound one, so that port 0 keeps the port it was given).
    addr: parking_lot::Mutex<SocketAddr>,
    running: tokio::sync::Mutex<Option<(watch::Sender<bool>, JoinHandle<()>)>>,
    active: AtomicBool,
}

impl NativeTransport {
    pub fn new(server: Arc<sibyl_transport::Server>, addr: SocketAddr) -> NativeTransport {
        NativeTransport {
            server,
            addr: parking_lot::Mutex::new(addr),
            running: tokio::sync::Mutex::new(None),
            active: AtomicBool::new(false),
        }
    }

    /// Binds and serves; does nothing when already serving.
    pub async fn start(&self) -> std::io::Result<SocketAddr> {
        let mut running = self.running.lock().await;
        let addr = *self.addr.lock();
        if running.is_some() {
            return Ok(addr);
        }
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let bound = listener.local_addr().unwrap_or(addr);
        *self.addr.lock() = bound;
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(self.server.clone().serve(listener, rx));
        *running = Some((tx, task));
        self.active.store(true, Ordering::Relaxed);
        tracing::info!("Starting listening for CQL clients on /{bound} (unencrypted)...");
        Ok(bound)
    }

    /// Stops accepting and closes every client connection; waits until the
    /// listener is closed.
    pub async fn stop(&self) {
        let mut running = self.running.lock().await;
        if let Some((tx, task)) = running.take() {
            let _ = tx.send(true);
            let _ = task.await;
            self.active.store(false, Ordering::Relaxed);
            tracing::info!("Stop listening for CQL clients");
        }
    }

    pub fn is_running(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    pub fn address(&self) -> SocketAddr {
        *self.addr.lock()
    }
}
