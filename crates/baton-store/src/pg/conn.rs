//! The connection's thread: jobs in, answers out.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::mpsc;

use crate::StoreError;

type Job = Box<dyn FnOnce(&mut Session) + Send>;

/// The connection and the statements prepared on it, by their text: a turn's statements are
/// parsed once per connection, not once per use (a round trip each).
pub(super) struct Session {
    pub(super) client: postgres::Client,
    pub(super) statements: HashMap<String, postgres::Statement>,
}

impl Session {
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
                let client = match postgres::Client::connect(&url, postgres::NoTls) {
                    Ok(client) => {
                        let _ = ready.send(Ok(()));
                        client
                    }
                    Err(source) => {
                        let _ = ready.send(Err(StoreError::Connect {
                            server: describe_server(&url),
                            source,
                        }));
                        return;
                    }
                };
                let mut session = Session {
                    client,
                    statements: HashMap::new(),
                };
                // Ends when every sender is gone: the store was dropped.
                for job in inbox {
                    job(&mut session);
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
        let job: Job = Box::new(move |session| {
            let _ = answer.send(job(session));
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
