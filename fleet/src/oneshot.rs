//! The boot-time oneshot (`pfx-eth-no-pause@IFACE.service`) as systemd reports it over
//! D-Bus. No systemd on the bus (containers, tests) is reported as unknown, explicitly.

/// As it goes into the agent's reports (defined in pfx-api, with `failed()`).
pub use pfx_api::agent::Oneshot;

pub fn unit_name(iface: &str) -> String {
    format!("pfx-eth-no-pause@{iface}.service")
}

pub fn read(iface: &str) -> Oneshot {
    let unit = unit_name(iface);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return Oneshot::Unknown {
                unit,
                reason: format!("no async runtime: {e}"),
            };
        }
    };
    rt.block_on(async {
        let fut = read_async(&unit);
        match tokio::time::timeout(std::time::Duration::from_secs(5), fut).await {
            Ok(o) => o,
            Err(_) => Oneshot::Unknown {
                unit: unit.clone(),
                reason: "systemd did not answer within 5 s".into(),
            },
        }
    })
}

async fn read_async(unit: &str) -> Oneshot {
    use zbus_systemd::systemd1::{ManagerProxy, ServiceProxy, UnitProxy};
    let unknown = |reason: String| Oneshot::Unknown {
        unit: unit.to_string(),
        reason,
    };
    let conn = match zbus::Connection::system().await {
        Ok(c) => c,
        Err(e) => return unknown(format!("no systemd bus: {e}")),
    };
    let mgr = match ManagerProxy::new(&conn).await {
        Ok(m) => m,
        Err(e) => return unknown(format!("no systemd bus: {e}")),
    };
    // LoadUnit, not GetUnit: an inactive oneshot may have been garbage-collected.
    let path = match mgr.load_unit(unit.to_string()).await {
        Ok(p) => p,
        Err(e) => return unknown(format!("systemd: LoadUnit({unit}): {e}")),
    };
    let u = UnitProxy::builder(&conn).path(path.clone()).build().await;
    let s = ServiceProxy::builder(&conn).path(path).build().await;
    let (u, s) = match (u, s) {
        (Ok(u), Ok(s)) => (u, s),
        (Err(e), _) | (_, Err(e)) => return unknown(format!("systemd proxy: {e}")),
    };
    match (
        u.active_state().await,
        s.result().await,
        s.exec_main_status().await,
    ) {
        (Ok(active_state), Ok(result), Ok(exec_main_status)) => Oneshot::Known {
            unit: unit.to_string(),
            active_state,
            result,
            exec_main_status,
        },
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            unknown(format!("systemd properties of {unit}: {e}"))
        }
    }
}
