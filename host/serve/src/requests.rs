//! The requests of an xDS stream, read from its HTTP/2 body and decoded as each completes.
//!
//! tonic's `Streaming` keeps its buffer at the size of the largest message the stream ever
//! sent (an Envoy's EDS subscription to a thousand clusters is tens of KiB, held for the
//! stream's life: most of an idle stream's memory) and reserves a message's declared length
//! before its bytes arrive (a client declaring 4 MiB and sending nothing would pin 4 MiB). This
//! reader holds only the bytes that arrived: a request that comes whole in one frame (most do)
//! is decoded where the transport put it, a request split over frames is put together in a
//! buffer of its own, and nothing is kept between requests (an idle stream holds no buffer).

use std::marker::PhantomData;

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::BodyExt;
use tonic::Status;

/// The gRPC message header: the compressed flag and the length.
const HEADER: usize = 5;

pub struct Requests<R> {
    body: axum::body::Body,
    /// What is left of the last frame, not copied: whole requests are decoded from it.
    frame: Bytes,
    /// A request split over frames, put together.
    buf: BytesMut,
    /// The largest message accepted (`--max-request-size`).
    max: usize,
    ended: bool,
    _request: PhantomData<fn() -> R>,
}

impl<R: prost::Message + Default> Requests<R> {
    pub fn new(body: axum::body::Body, max: usize) -> Self {
        Requests { body, frame: Bytes::new(), buf: BytesMut::new(), max, ended: false, _request: PhantomData }
    }

    /// The next request; `None` once the client ended the stream (or cancelled it).
    pub async fn message(&mut self) -> Result<Option<R>, Status> {
        loop {
            if let Some(r) = self.decode()? {
                return Ok(Some(r));
            }
            if self.ended {
                return if self.buf.is_empty() && self.frame.is_empty() {
                    Ok(None)
                } else {
                    Err(Status::internal("Unexpected EOF decoding stream."))
                };
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.take(data);
                    }
                }
                Some(Err(e)) => {
                    let status = Status::from_error(Box::new(e));
                    return if status.code() == tonic::Code::Cancelled { Ok(None) } else { Err(status) };
                }
                None => self.ended = true,
            }
        }
    }

    /// A frame's bytes: kept as they are while no request is half put together, else added
    /// to the one that is.
    fn take(&mut self, data: Bytes) {
        if self.buf.is_empty() && self.frame.is_empty() {
            self.frame = data;
        } else {
            self.buf.extend_from_slice(&self.frame);
            self.frame = Bytes::new();
            self.buf.extend_from_slice(&data);
        }
    }

    /// A whole message from what arrived, if one is there.
    fn decode(&mut self) -> Result<Option<R>, Status> {
        if !self.buf.is_empty() {
            let r = self.decode_from_buf();
            if self.buf.is_empty() {
                // Nothing kept between requests: the next one most likely comes whole.
                self.buf = BytesMut::new();
            }
            return r;
        }
        if self.frame.is_empty() {
            return Ok(None);
        }
        match self.whole(&self.frame)? {
            Some(len) => {
                let r = R::decode(&self.frame[HEADER..HEADER + len]).map_err(crate::codec::malformed::<R>)?;
                self.frame.advance(HEADER + len);
                if self.frame.is_empty() {
                    // An empty slice still holds the transport's buffer.
                    self.frame = Bytes::new();
                }
                Ok(Some(r))
            }
            None => {
                // Cut short: the rest comes in later frames.
                self.buf.extend_from_slice(&self.frame);
                self.frame = Bytes::new();
                Ok(None)
            }
        }
    }

    fn decode_from_buf(&mut self) -> Result<Option<R>, Status> {
        let Some(len) = self.whole(&self.buf)? else { return Ok(None) };
        let r = R::decode(&self.buf[HEADER..HEADER + len]).map_err(crate::codec::malformed::<R>)?;
        self.buf.advance(HEADER + len);
        Ok(Some(r))
    }

    /// The length of the message at the start of `bytes` if all of it is there; an error for
    /// a compressed one or one over the limit.
    fn whole(&self, bytes: &[u8]) -> Result<Option<usize>, Status> {
        if bytes.len() < HEADER {
            return Ok(None);
        }
        match bytes[0] {
            0 => {}
            // The stream's headers named no encoding (one that did was refused).
            1 => {
                return Err(Status::internal(
                    "protocol error: received message with compressed-flag but no grpc-encoding was specified",
                ));
            }
            f => {
                return Err(Status::internal(format!(
                    "protocol error: received message with invalid compression flag: {f} (valid flags are 0 and 1)"
                )));
            }
        }
        let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
        if len > self.max {
            return Err(Status::out_of_range(format!(
                "Error, decoded message length too large: found {len} bytes, the limit is: {} bytes",
                self.max
            )));
        }
        Ok((bytes.len() >= HEADER + len).then_some(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
    use prost::Message as _;

    fn frame(r: &DiscoveryRequest) -> Vec<u8> {
        let body = r.encode_to_vec();
        let mut f = vec![0];
        f.extend_from_slice(&(body.len() as u32).to_be_bytes());
        f.extend_from_slice(&body);
        f
    }

    fn requests(chunks: Vec<Vec<u8>>, max: usize) -> Requests<DiscoveryRequest> {
        let stream = futures::stream::iter(chunks.into_iter().map(|c| Ok::<_, std::io::Error>(Bytes::from(c))));
        Requests::new(axum::body::Body::from_stream(stream), max)
    }

    fn named(n: usize) -> DiscoveryRequest {
        DiscoveryRequest { resource_names: (0..n).map(|i| format!("cluster-{i:05}")).collect(), ..Default::default() }
    }

    /// Messages split over frames and several in one frame are decoded in order; no buffer is
    /// kept between them.
    #[tokio::test]
    async fn messages_are_decoded_across_frames_and_a_large_buffer_is_let_go() {
        let (big, small) = (frame(&named(4_000)), frame(&named(1)));
        assert!(big.len() > 32 << 10);
        let mut two = small.clone();
        two.extend_from_slice(&small);
        let (a, b) = big.split_at(big.len() / 3);
        let mut r = requests(vec![a.to_vec(), b.to_vec(), two], 4 << 20);
        assert_eq!(r.message().await.unwrap().unwrap().resource_names.len(), 4_000);
        assert_eq!(r.buf.capacity(), 0, "the buffer is kept");
        assert_eq!(r.message().await.unwrap().unwrap().resource_names, ["cluster-00000"]);
        assert!(!r.frame.is_empty(), "the second message is decoded from the frame, not copied");
        assert_eq!(r.message().await.unwrap().unwrap().resource_names, ["cluster-00000"]);
        assert!(r.frame.is_empty() && r.buf.capacity() == 0, "nothing kept between requests");
        assert!(r.message().await.unwrap().is_none());
    }

    /// A declared length is not reserved before its bytes come; one over the limit is refused
    /// at once, and a message cut short by the end of the stream is an error.
    #[tokio::test]
    async fn declared_lengths_cost_nothing_until_they_arrive() {
        let mut header = vec![0u8];
        header.extend_from_slice(&(4u32 << 20).to_be_bytes());
        header.extend_from_slice(b"0123456789");
        let mut r = requests(vec![header.clone()], 4 << 20);
        let err = r.message().await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::Internal, "{err}");
        assert!(r.buf.capacity() < 1 << 10, "{} bytes reserved", r.buf.capacity());
        let err = requests(vec![header], 1 << 20).message().await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::OutOfRange, "{err}");
        assert!(err.message().contains("too large"), "{err}");
        for (flag, code) in [(1u8, tonic::Code::Internal), (7, tonic::Code::Internal)] {
            let mut f = frame(&named(1));
            f[0] = flag;
            assert_eq!(requests(vec![f], 1 << 20).message().await.unwrap_err().code(), code);
        }
        let garbage = vec![0u8, 0, 0, 0, 3, 0xff, 0xff, 0xff];
        assert_eq!(requests(vec![garbage], 1 << 20).message().await.unwrap_err().code(), tonic::Code::InvalidArgument);
    }
}
