//! The connection's thread: jobs in, answers out.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use crate::StoreError;

/// A job, given the session, or why there is none: the server closed the connection and
/// could not be reached again.
type Job = Box<dyn FnOnce(&mut Session, Option<StoreError>) + Send>;

/// How long connecting may take when the URL does not say (`connect_timeout`): a server that
/// does not answer is an error a caller can retry, not a call that hangs.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The connection and the statements prepared on it, by their text: a turn's statements are
/// parsed once per connection, not once per use (a round trip each).
pub(super) struct Session {
    pub(super) client: postgres::Client,
    pub(super) statements: HashMap<String, postgres::Statement>,
}

impl Session {
    /// A new connection if the server closed this one (it restarted, failed over, or an
    /// administrator ended it): the statements go with the old one. Tried once per job, so a
    /// caller that polls retries at its own pace.
    fn reconnect_if_closed(&mut self, url: &str) -> Result<(), StoreError> {
        if !self.client.is_closed() {
            return Ok(());
        }
        self.client = connect(url)?;
        self.statements.clear();
        Ok(())
    }

    /// `sql` prepared on this connection, once.
    pub(super) fn prepared(&mut self, sql: &str) -> Result<postgres::Statement, postgres::Error> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql)?;
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }
}

pub(super) struct Conn {
    jobs: Mutex<mpsc::Sender<Job>>,
}

/// A connection to `url`, within [`CONNECT_TIMEOUT`] unless the URL sets its own; the error
/// names the server.
pub(super) fn connect(url: &str) -> Result<postgres::Client, StoreError> {
    let failed = |source: postgres::Error| StoreError::Connect {
        server: describe_server(url),
        source: source.into(),
    };
    let mut config: postgres::Config = url.parse().map_err(failed)?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    config.connect(postgres::NoTls).map_err(failed)
}

/// `postgres://user:secret@host:5432/db?x=y` → `postgres://user@host:5432/db`: the server a
/// message names, never its password.
pub fn describe_server(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "the PostgreSQL server".to_owned();
    };
    let rest = rest.split('?').next().unwrap_or(rest);
    let (auth, place) = match rest.rsplit_once('@') {
        Some((auth, place)) => (Some(auth), place),
        None => (None, rest),
    };
    match auth.map(|a| a.split(':').next().unwrap_or(a)) {
        Some(user) => format!("{scheme}://{user}@{place}"),
        None => format!("{scheme}://{place}"),
    }
}

impl Conn {
    /// Connects on a new thread; the connection's error, naming the server, if it cannot.
    pub(super) fn connect(url: &str) -> Result<Self, StoreError> {
        let (jobs, inbox) = mpsc::channel::<Job>();
        let (ready, connected) = mpsc::channel::<Result<(), StoreError>>();
        let url = url.to_owned();
        std::thread::Builder::new()
            .name("baton-postgres".to_owned())
            .spawn(move || {
                let client = match connect(&url) {
                    Ok(client) => {
                        let _ = ready.send(Ok(()));
                        client
                    }
                    Err(err) => {
                        let _ = ready.send(Err(err));
                        return;
                    }
                };
                let mut session = Session {
                    client,
                    statements: HashMap::new(),
                };
                // Ends when every sender is gone: the store was dropped.
                for job in inbox {
                    let outage = session.reconnect_if_closed(&url).err();
                    job(&mut session, outage);
                }
            })
            .map_err(StoreError::Recorder)?;
        connected.recv().map_err(|_| {
            StoreError::Recorder(std::io::Error::other("the connection thread ended"))
        })??;
        Ok(Self {
            jobs: Mutex::new(jobs),
        })
    }

    /// Runs `job` with the connection, waiting for its answer.
    pub(super) fn call<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut postgres::Client) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.call_session(move |session| job(&mut session.client))
    }

    /// Runs `job` with the connection and its prepared statements, waiting for its answer.
    pub(super) fn call_session<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Session) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (answer, answered) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |session, outage| {
            let _ = answer.send(match outage {
                Some(err) => Err(err),
                None => job(session),
            });
        });
        let gone = || StoreError::Recorder(std::io::Error::other("the connection thread ended"));
        self.jobs
            .lock()
            .map_err(|_| gone())?
            .send(job)
            .map_err(|_| gone())?;
        answered.recv().map_err(|_| gone())?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_named_without_its_password() {
        assert_eq!(
            describe_server("postgres://baton:s3cret@db.internal:5433/runs?sslmode=disable"),
            "postgres://baton@db.internal:5433/runs"
        );
        assert_eq!(
            describe_server("postgresql://localhost/runs"),
            "postgresql://localhost/runs"
        );
    }
}
